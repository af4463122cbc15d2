// shardlab pipeline: the acceptance figures from the command line, and bad input.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"
#include "tests/verdict_powers.hpp"

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

  TEST_CASE("shardlab pipeline --schedule interleaved: the issue's command passes; bubble 3/19, v times the messages") {
    auto r = run_binary("shardlab pipeline --schedule interleaved --stages 4 --virtual-stages 2 --chunks 8");
    REQUIRE(r.status == 0);
    CHECK(r.out.find("PASS pipeline") != std::string::npos);
    CHECK(shardlab::testing::verdicts_without_power(r.out).empty());  // every verdict line states its power
    auto i = run_binary("shardlab pipeline --schedule interleaved --stages 4 --virtual-stages 2 --chunks 8 --json");
    auto f = run_binary("shardlab pipeline --schedule 1f1b --stages 4 --chunks 8 --json");
    REQUIRE(i.status == 0);
    REQUIRE(f.status == 0);
    const auto ji = nlohmann::json::parse(i.out), jf = nlohmann::json::parse(f.out);
    CHECK(ji["pass"] == true);
    CHECK(ji["virtual_stages"] == 2);
    CHECK(ji["bubble_predicted"] == doctest::Approx(3.0 / 19));  // (P-1)/(v m+P-1)
    CHECK(ji["bubble_measured"] == doctest::Approx(3.0 / 19).epsilon(1e-12));
    CHECK(jf["bubble_measured"] == doctest::Approx(3.0 / 11).epsilon(1e-12));  // 1F1B: (P-1)/(m+P-1)
    // Messages: 2m(vP-1) = 112 against 1F1B's 2m(P-1) = 48, each a [2, 8] float32 block of 64 B.
    CHECK(ji["p2p_messages"] == 112);
    CHECK(jf["p2p_messages"] == 48);
    CHECK(ji["p2p_bytes"] == 112 * 64);
    // Megatron's warm-up, 2(P-s-1) + (v-1)P forwards, then one more before the first backward.
    CHECK(ji["peak_stash"] == nlohmann::json::array({11, 9, 7, 5}));
    CHECK(run_binary("shardlab pipeline --schedule interleaved --chunks 8 --inject swap-microbatches --quiet").status == 1);
    CHECK(run_binary("shardlab pipeline --schedule interleaved --chunks 8 --inject perturb:1e-3 --quiet").status == 1);
  }

  TEST_CASE("shardlab pipeline: the commands lessons 16 and 17 print under Next: draw their timelines in 100 columns") {
    for (const char* lesson : {"16_pipeline", "17_3d_parallelism"}) {
      CAPTURE(lesson);
      const auto l = run_binary(lesson);
      REQUIRE(l.status == 0);
      std::size_t at = 0;
      int commands = 0;
      while ((at = l.out.find("build/bin/shardlab pipeline", at)) != std::string::npos) {
        const std::size_t end = l.out.find('\n', at);
        const std::string command = l.out.substr(at + std::string("build/bin/").size(), end - at - 10);
        at = end;
        CAPTURE(command);
        const auto r = run_binary(command);
        CHECK(r.status == 0);
        CHECK(r.out.find("wider than") == std::string::npos);
        CHECK(r.out.find("device 3 |") != std::string::npos);
        // Within 100 columns as drawn: the output's own wrapping (core/wrap) would continue a
        // longer row on an indented line below it.
        std::size_t start = 0;
        bool after_row = false;
        for (std::size_t i = 0; i <= r.out.size(); ++i)
          if (i == r.out.size() || r.out[i] == '\n') {
            const std::string line = r.out.substr(start, i - start);
            CHECK(line.size() <= 100);
            if (after_row) CHECK(line.rfind("    ", 0) != 0);
            after_row = line.rfind("device ", 0) == 0;
            start = i + 1;
          }
        ++commands;
      }
      CHECK(commands >= 1);
    }
  }

  TEST_CASE("shardlab pipeline: naive takes one chunk by default; bad numbers are one sentence, exit 2") {
    auto n = run_binary("shardlab pipeline --schedule naive --stages 2 --json");
    REQUIRE(n.status == 0);
    CHECK(nlohmann::json::parse(n.out)["bubble_measured"] == doctest::Approx(0.5));
    for (const char* bad : {"--schedule naive --chunks 4", "--layers 7 --uneven none", "--layers 64", "--schedule zigzag", "--stages 0",
                            "--chunks -3", "--virtual-stages 2", "--schedule interleaved --chunks 6",
                            "--schedule interleaved --virtual-stages 1", "--schedule interleaved --stages 1 --chunks 2"}) {
      CAPTURE(bad);
      auto r = run_binary(std::string("shardlab pipeline ") + bad);
      CHECK(r.status == 2);
      CHECK(count_lines(r.err) == 1);
      CHECK(r.out.empty());
    }
    CHECK(run_binary("shardlab pipeline --inject perturb:1e-3 --quiet").status == 1);
  }
}
