// shardlab pipeline: the acceptance figures from the command line, and bad input.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

TEST_SUITE("cmd pipeline") {
  TEST_CASE("shardlab pipeline --json: GPipe's bubble 3/7 measured and predicted; 1F1B the same, fewer stashed") {
    auto g = run_binary("shardlab pipeline --stages 4 --chunks 4 --schedule gpipe --json");
    auto f = run_binary("shardlab pipeline --stages 4 --chunks 4 --schedule 1f1b --json");
    REQUIRE(g.status == 0);
    REQUIRE(f.status == 0);
    const auto jg = nlohmann::json::parse(g.out), jf = nlohmann::json::parse(f.out);
    CHECK(jg["pass"] == true);
    CHECK(jg["bubble_predicted"] == doctest::Approx(3.0 / 7));
    CHECK(jg["bubble_measured"] == doctest::Approx(3.0 / 7).epsilon(1e-12));
    CHECK(jf["bubble_measured"] == jg["bubble_measured"]);
    CHECK(jg["peak_stash"] == nlohmann::json::array({4, 4, 4, 4}));
    CHECK(jf["peak_stash"] == nlohmann::json::array({4, 3, 2, 1}));
    CHECK(jf["peak_stash_total"] < jg["peak_stash_total"]);
    // 3 boundaries, each crossed by 4 activations and 4 gradients of [2, 8] float32 (64 B).
    CHECK(jg["p2p_bytes"] == 3 * 2 * 4 * 64);
  }

  TEST_CASE("shardlab pipeline: naive takes one chunk by default; bad numbers are one sentence, exit 2") {
    auto n = run_binary("shardlab pipeline --schedule naive --stages 2 --json");
    REQUIRE(n.status == 0);
    CHECK(nlohmann::json::parse(n.out)["bubble_measured"] == doctest::Approx(0.5));
    for (const char* bad : {"--schedule naive --chunks 4", "--layers 7", "--layers 64", "--schedule zigzag", "--stages 0",
                            "--chunks -3"}) {
      CAPTURE(bad);
      auto r = run_binary(std::string("shardlab pipeline ") + bad);
      CHECK(r.status == 2);
      CHECK(count_lines(r.err) == 1);
      CHECK(r.out.empty());
    }
    CHECK(run_binary("shardlab pipeline --inject perturb:1e-3 --quiet").status == 1);
  }
}
