// Lesson 19: ring attention on X=4 (S = 64 tokens in 8 chunks of 8, head size 16). Expected values
// by hand: a device's block of keys (or values, or their gradients) is [16, 16] = 256 elements;
// the forward shifts K and V n - 1 = 3 times, the backward K and V 3 times and dK and dV 4 times.
// Causal blocks of 8 x 8: device i of the contiguous order has 4i + 3 unmasked, of the balanced
// order 2n + 1 = 9; a forward block costs 4 x 8 x 8 x 16 = 4096 FLOPs.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "tests/run_binary.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

namespace {
nlohmann::json run_json(const std::string& command) {
  auto r = run_binary(command);
  INFO(command);
  INFO(r.err);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out);
}
}  // namespace

TEST_SUITE("lessons") {
  TEST_CASE("lesson 19 (context parallel) --json in 3 dtypes: pass, bytes = formula, equal FLOPs, memory") {
    for (const auto& [type, eb] : {std::pair<std::string, double>{"float32", 4}, {"float64", 8}, {"bfloat16", 2}}) {
      CAPTURE(type);
      const auto j = run_json("19_context_parallel --json --dtype " + type);
      CHECK(j["pass"] == true);
      const double block = 256 * eb;
      CHECK(j["forward_bytes_per_device"].get<double>() == 2 * 3 * block);
      CHECK(j["backward_bytes_per_device"].get<double>() == (2 * 3 + 2 * 4) * block);
      // The whole session: the contiguous order's run and the balanced one's, each 6 + 14 blocks.
      CHECK(j["bytes_per_device"].get<double>() == 2 * (6 + 14) * block);
      for (const auto& c : j["collectives"]) {
        CHECK(c["op"] == "collective_permute");
        CHECK(c["bytes_per_device"].get<double>() == block);
        CHECK(c["predicted_bytes_per_device"].get<double>() == block);
      }
      CHECK(j["balanced_flops_spread"].get<double>() == 0);
      CHECK(j["contiguous_flops_spread"].get<double>() == (15 - 3) * 4096.0);
      // Peak per device, backward: 9 blocks of 256 (q, dO, o, dq, k, v, dk, dv, one incoming),
      // lse and D of 16, two 8 x 8 buffers; plain attention: 8 [64, 16], 2 [64, 64], 2 [64].
      CHECK(j["peak_bytes_per_device"].get<double>() == (9 * 256 + 2 * 16 + 2 * 64) * eb);
      CHECK(j["plain_peak_bytes"].get<double>() == (8 * 64 * 16 + 2 * 64 * 64 + 2 * 64) * eb);
    }
    // On a ring of 2 the sequence is 32 tokens: the forward sends K and V once.
    const auto two = run_json("19_context_parallel --json --mesh X=2");
    CHECK(two["pass"] == true);
    CHECK(two["forward_bytes_per_device"].get<double>() == 2 * 256 * 4);
  }

  TEST_CASE("lesson 19 text: tables and verdicts; planted faults FAIL; a mesh that is not a ring exits 2") {
    auto r = run_binary("19_context_parallel");
    CHECK(r.status == 0);
    for (const char* s : {"balanced order: forward FLOPs equal on every device within one block: PASS",
                          "bytes per device equal the formula, forward and backward: PASS",
                          "peak memory per device at most 1/4 of plain attention's: PASS", "balanced dK: PASS",
                          "by keys (lesson 12)", "nvlink-a100", "\nPASS 19_context_parallel"})
      CHECK_MESSAGE(r.out.find(s) != std::string::npos, s);
    for (const char* fault : {"perturb:1e-3", "stale-receive"}) {
      auto f = run_binary(std::string("19_context_parallel --quiet --inject ") + fault);
      CHECK(f.status == 1);
      CHECK(f.out.rfind("FAIL", 0) == 0);
    }
    CHECK(run_binary("19_context_parallel --quiet --inject perturb:1e-9 --dtype float64").status == 1);
    for (const char* mesh : {"X=2,Y=2", "X=1"}) {
      auto bad = run_binary(std::string("19_context_parallel --mesh ") + mesh);
      CHECK(bad.status == 2);
      CHECK(count_lines(bad.err) == 1);
      CHECK(bad.out.empty());
    }
  }

  TEST_CASE("lesson 19's cost model prices one element type, the run's: 2 B halves the ring step") {
    const auto f32 = run_json("19_context_parallel --json --dtype float32");
    const auto bf16 = run_json("19_context_parallel --json --dtype bfloat16");
    // K and V blocks of [16384, 4096] on 8 devices: the transfer scales with the element's bytes.
    for (const char* hw : {"tpu-v4", "tpu-v5e", "nvlink-a100"}) {
      CAPTURE(hw);
      const std::string t = std::string("ring_step_transfer_us_") + hw;
      CHECK(bf16[t].get<double>() < 0.55 * f32[t].get<double>());
    }
    // An A100 runs float32 at 19.5 TFLOP/s, not its bfloat16 peak of 312: 16 times the compute.
    CHECK(f32["ring_step_compute_us_nvlink-a100"].get<double>() ==
          doctest::Approx(16 * bf16["ring_step_compute_us_nvlink-a100"].get<double>()));
    // In bfloat16 the v4 and v5e hide the ring behind compute.
    const auto text = run_binary("19_context_parallel --dtype bfloat16");
    CHECK(text.out.find("bfloat16, 2 B per element") != std::string::npos);
    CHECK(bf16["ring_step_presets_hidden"].get<double>() >= 2);
    // float64: no TPU has a unit for it, and the table says so rather than pricing it.
    CHECK(run_binary("19_context_parallel --dtype float64").out.find("no float64 unit") != std::string::npos);
    CHECK(text.out.find("(Online softmax: a running max m and sum l per query row") != std::string::npos);
  }
}
