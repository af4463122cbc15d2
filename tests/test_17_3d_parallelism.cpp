// Lesson 17: DP + PP + TP with ZeRO-1 on D=2,P=2,T=2: one Adam step equal to the unsharded model's,
// bytes per axis equal their formulas, and tensor parallelism cheaper inside a node.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"

using shardlab::testing::run_binary;

TEST_SUITE("lessons") {
  TEST_CASE("lesson 17 (3D) --json: PASS, bytes by axis, TP inside a node modeled cheaper") {
    auto r = run_binary("17_3d_parallelism --json");
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    // float32 blocks of [2, 8] = 64 B. T: a stage-1 device all-reduces 2 chunks forward and 2
    // back over 2 devices, each sending 2(2-1)/2 x 64 = 64 B: 256. P: 2 chunks x 64 B = 128.
    // D: ReduceScatter + AllGather of W1 [8, 8] and W2 [8, 8] shards: 2 x 1/2 x 128 x 4 = 512.
    CHECK(j["bytes_T"] == 256);
    CHECK(j["bytes_P"] == 128);
    CHECK(j["bytes_D"] == 512);
    CHECK(j["modeled_s_gpt3_tp_inside"] < j["modeled_s_gpt3_tp_across"]);
    CHECK(run_binary("17_3d_parallelism --inject perturb:1e-3 --quiet").status == 1);
    CHECK(run_binary("17_3d_parallelism --mesh X=8").status == 2);
  }
}
