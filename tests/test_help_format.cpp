// harness/cli/help_format.cpp: every lesson's and every shardlab command's --help fits 100 columns
// (core/wrap.cpp's last-column wrapping is tested in tests/test_wrap.cpp).
#include <doctest/doctest.h>

#include <sstream>

#include "tests/run_binary.hpp"

using shardlab::testing::run_binary;

namespace {
std::size_t widest(const std::string& text) {
  std::istringstream in(text);
  std::size_t w = 0;
  for (std::string line; std::getline(in, line);) w = std::max(w, line.size());
  return w;
}
}  // namespace

TEST_CASE("--help of every lesson and every shardlab command fits 100 columns") {
  for (const char* bin : {"01_mesh_and_layout", "08_gspmd_ffn", "12_attention", "15_zero", "16_pipeline",
                          "17_3d_parallelism", "18_sequence_parallel", "19_context_parallel", "20_expert_parallel",
                          "21_planning_a_model", "shardlab", "shardlab bench",
                          "shardlab bench collectives", "shardlab bench ffn", "shardlab cost", "shardlab ffn",
                          "shardlab matmul", "shardlab einsum", "shardlab sweep", "shardlab run", "shardlab check",
                          "shardlab zero", "shardlab pipeline", "shardlab soak", "shardlab exercise",
                          "shardlab power", "shardlab moe", "shardlab ring-attention",
                          "shardlab adam", "shardlab nested"}) {
    const auto r = run_binary(std::string(bin) + " --help");
    CAPTURE(bin);
    CHECK(r.status == 0);
    CHECK(widest(r.out) <= 100);
  }
}
