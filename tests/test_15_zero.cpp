// Lesson 15: plain DP and ZeRO 1-3 on article 004's three layers: bytes per step from the ledger
// (ZeRO-3 1.5x plain DP by the ring formulas), what each device holds, weights equal to the
// unsharded Adam run, a corrupted reference caught, a mesh that does not divide refused.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"

using shardlab::testing::run_binary;

TEST_SUITE("lessons") {
  TEST_CASE("lesson 15 (ZeRO) --json: bytes per step of each stage, ZeRO-3 1.5x plain DP") {
    auto r = run_binary("15_zero --json");
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    // P = 3 x 12 x 12 = 432 float32 weights on 3 devices: a ring ReduceScatter or AllGather of all
    // of them sends 2/3 x 432 x 4 = 1152 bytes per device.
    CHECK(j["bytes_per_step_dp"] == 2 * 1152);
    CHECK(j["bytes_per_step_z1"] == 2 * 1152);
    CHECK(j["bytes_per_step_z2"] == 2 * 1152);
    CHECK(j["bytes_per_step_z3"] == 3 * 1152);
    CHECK(j["zero3_over_dp"] == 1.5);
    // Held at most: plain DP everything; ZeRO-3 a third of the weights plus one layer (144).
    CHECK(j["held_params_dp"] == 432);
    CHECK(j["held_states_dp"] == 864);
    CHECK(j["held_states_z1"] == 288);
    CHECK(j["held_grads_z2"] == 144 + 144);
    CHECK(j["held_params_z3"] == 144 + 144);
  }

  TEST_CASE("lesson 15: a corrupted reference fails; a mesh the layers do not split over is refused") {
    CHECK(run_binary("15_zero --inject perturb:1e-3 --quiet").status == 1);
    auto bad = run_binary("15_zero --mesh X=5");
    CHECK(bad.status == 2);
    CHECK(bad.out.empty());
    CHECK(bad.err.find("5 does not divide them: use a device count that divides 12 (--mesh X=3)") != std::string::npos);
    CHECK(run_binary("15_zero --mesh X=2,Y=2").status == 2);
    CHECK(run_binary("15_zero --mesh X=1 --quiet").status == 0);  // one device: nothing moves
  }

  TEST_CASE("lesson 15: the words it uses first are explained where they appear") {
    const auto r = run_binary("15_zero");
    CHECK(r.out.find("z3_a is ZeRO-3's gathered copy of A, z3_dC the gradient of C") != std::string::npos);
  }
}
