// shardlab ring-attention: harness/models/ring_attention.* through the command line. Expected
// values by hand: on 8 devices with chunks of 8 and head 16, a block is [16, 16] = 256 elements,
// float32: 1024 B; a device sends 2 x 7 + 4 x 7 + 2 = 44 blocks. Contiguous order: device i has
// 4i + 3 unmasked blocks of 4 x 8 x 8 x 16 = 4096 FLOPs, so the spread is 28 blocks.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "tests/run_binary.hpp"
#include "tests/verdict_powers.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

TEST_SUITE("cmd_ring_attention") {
  TEST_CASE("shardlab ring-attention --json: bytes, FLOPs spread and the cost model by hand") {
    auto r = run_binary("shardlab ring-attention --devices 8 --json --tokens 131072 --width 4096");
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    CHECK(j["bytes_per_device"].get<double>() == 44 * 1024);
    CHECK(j["bytes_formula"].get<double>() == 44 * 1024);
    CHECK(j["flops_spread"].get<double>() == 0);
    // nvlink-a100: a launch of 6.6 us, one hop of 0.6 us and K, V blocks of 2 x 16384 x 4096 x 4 B
    // at 300 GB/s; the average step (17/8 blocks of 4 x 8192^2 x 4096 FLOPs) at 312 TFLOP/s.
    CHECK(j["nvlink-a100_step_transfer_s"].get<double>() ==
          doctest::Approx(6.6e-6 + 0.6e-6 + 2.0 * 16384 * 4096 * 4 / 300e9));
    CHECK(j["nvlink-a100_step_compute_s"].get<double>() ==
          doctest::Approx(17.0 / 8 * 4 * 8192.0 * 8192 * 4096 / 312e12));
    auto c = run_binary("shardlab ring-attention --devices 8 --order contiguous --json");
    REQUIRE(c.status == 0);
    CHECK(nlohmann::json::parse(c.out)["flops_spread"].get<double>() == 28 * 4096.0);
  }

  TEST_CASE("shardlab ring-attention: every verdict line states its power") {
    const auto r = run_binary("shardlab ring-attention");
    REQUIRE(r.status == 0);
    CHECK(r.out.find("bytes per device equal the formula: PASS (exact, no tolerance)") != std::string::npos);
    CHECK(r.out.find("dV: PASS max_abs_err=6.88e-08 (catches ") != std::string::npos);
    CHECK(shardlab::testing::verdicts_without_power(r.out).empty());
  }

  TEST_CASE("shardlab ring-attention: planted faults FAIL; bad input is one sentence and exit 2") {
    for (const char* fault : {"stale-receive", "perturb:1e-3"}) {
      auto f = run_binary(std::string("shardlab ring-attention --quiet --inject ") + fault);
      CHECK(f.status == 1);
      CHECK(f.out.rfind("FAIL", 0) == 0);
    }
    for (const char* bad : {"--devices 1", "--order zigzag", "--chunk 0", "--chunk 2000", "--width 0"}) {
      auto b = run_binary(std::string("shardlab ring-attention ") + bad);
      CAPTURE(bad);
      CHECK(b.status == 2);
      CHECK(count_lines(b.err) == 1);
      CHECK(b.out.empty());
    }
  }
}
