// Lesson 18: sequence parallelism beside Megatron's tensor parallelism on Y=4, both derived by the
// planner from annotations. Expected values by hand (float32): att, ff, df, da, a, f, dy, dr1 are
// [2, 8, 16] = 1024 B; a ring all_reduce over 4 sends 2 x 3/4 of it (1536 B), an all_gather or a
// reduce_scatter 3/4 (768 B); dg and dc are [16] = 64 B, all-reduced: 96 B.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

TEST_SUITE("lessons") {
  TEST_CASE("lesson 18 (sequence parallel) --json: the same forward bytes, 1/t of the activations between blocks") {
    auto r = run_binary("18_sequence_parallel --json");
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    // Forward: Megatron all-reduces att and ff; sequence all-gathers a and f and reduce-scatters
    // att and ff: 2 x 1536 = 4 x 768 = 3072.
    CHECK(j["megatron_forward_bytes"] == 2 * 1536);
    CHECK(j["sequence_forward_bytes"] == 4 * 768);
    // Whole run: Megatron 4 all_reduces (6144); sequence 8 gathers or scatters, the 2 re-gathers
    // of a and f for the weights' gradients and the 4 layer norm parameters' all_reduces:
    // 10 x 768 + 4 x 96 = 8064.
    CHECK(j["megatron_bytes_per_device"] == 4 * 1536);
    CHECK(j["sequence_bytes_per_device"] == 10 * 768 + 4 * 96);
    CHECK(j["megatron_collectives"] == 4);
    CHECK(j["sequence_collectives"] == 14);
    // Between the blocks, per device: x, xc, sq, xn, xs, a (and r1, xc2 ... f), att, ff, y: 15
    // tensors of [2, 8, 16] and 8 statistics of [2, 8] (mu, var, ve, rs per norm), float32:
    // 15 x 1024 + 8 x 64 = 15872 B whole; split over s on 4 devices, a quarter: 3968 B.
    CHECK(j["megatron_between_blocks_bytes"] == 15 * 1024 + 8 * 64);
    CHECK(j["sequence_between_blocks_bytes"] == (15 * 1024 + 8 * 64) / 4);
    CHECK(j["sequence_peak_bytes"].get<double>() < j["megatron_peak_bytes"].get<double>());
  }

  TEST_CASE("lesson 18 (sequence parallel) text: the collectives in run order, the verdict; faults caught") {
    auto r = run_binary("18_sequence_parallel");
    CHECK(r.status == 0);
    for (const char* s : {"forward   2 all_reduce   3072  2 all_gather, 2 reduce_scatter",
                          "all_gather a over Y, reduce_scatter att over Y, all_gather f over Y,",
                          "are all-reduced: dc2, dg2, dc1, dg1.",
                          "sequence forward: 2 all_gathers and 2 reduce_scatters for megatron's 2 all_reduces: PASS",
                          "sequence: the activations between the blocks 1/4 of megatron's: PASS",
                          "megatron: 14 of 14 checks pass", "sequence: 14 of 14 checks pass", "Takeaway:", "Next:",
                          "\nPASS 18_sequence_parallel"})
      CHECK_MESSAGE(r.out.find(s) != std::string::npos, s);
    CHECK(run_binary("18_sequence_parallel --inject perturb:1e-3 --quiet").status == 1);
    CHECK(run_binary("18_sequence_parallel --inject skip-add --quiet").status == 1);
    auto two = run_binary("18_sequence_parallel --mesh X=2,Y=2");
    CHECK(two.status == 2);
    CHECK(count_lines(two.err) == 1);
    CHECK(two.out.empty());
  }
}
