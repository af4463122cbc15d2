// harness/cli/help_format.cpp: --help within 100 columns. wrap_help wraps a long description under
// itself; every lesson's and every shardlab command's --help fits.
#include <doctest/doctest.h>

#include <sstream>

#include "harness/cli/help_format.hpp"
#include "tests/run_binary.hpp"

using shardlab::wrap_help;
using shardlab::testing::run_binary;

namespace {
std::size_t widest(const std::string& text) {
  std::istringstream in(text);
  std::size_t w = 0;
  for (std::string line; std::getline(in, line);) w = std::max(w, line.size());
  return w;
}
}  // namespace

TEST_CASE("wrap_help: a long description continues under itself; short lines and words stay") {
  const std::string head = "  --mesh TEXT                 ";
  std::string words;
  for (int i = 0; i < 30; ++i) words += "word" + std::to_string(i) + " ";
  const std::string wrapped = wrap_help(head + words + "\nshort line\n", 60);
  CHECK(widest(wrapped) <= 60);
  CHECK(wrapped.rfind(head + "word0 word1", 0) == 0);
  CHECK(wrapped.find("\n" + std::string(head.size(), ' ') + "word") != std::string::npos);
  CHECK(wrapped.find("\nshort line\n") != std::string::npos);
  std::string back;  // every word kept, in order
  std::istringstream in(wrapped);
  for (std::string w; in >> w;) back += w + " ";
  CHECK(back == "--mesh TEXT " + words + "short line ");
  CHECK(wrap_help("x") == "x");
  const std::string unbreakable(150, 'a');
  CHECK(wrap_help(unbreakable) == unbreakable);  // nowhere to break: kept whole
}

TEST_CASE("--help of every lesson and every shardlab command fits 100 columns") {
  for (const char* bin : {"01_mesh_and_layout", "08_gspmd_ffn", "12_attention", "15_zero", "16_pipeline",
                          "17_3d_parallelism", "18_sequence_parallel", "shardlab", "shardlab bench",
                          "shardlab bench collectives", "shardlab bench ffn", "shardlab cost", "shardlab ffn",
                          "shardlab matmul", "shardlab einsum", "shardlab sweep", "shardlab run", "shardlab check",
                          "shardlab zero", "shardlab pipeline", "shardlab soak", "shardlab exercise",
                          "shardlab power"}) {
    const auto r = run_binary(std::string(bin) + " --help");
    CAPTURE(bin);
    CHECK(r.status == 0);
    CHECK(widest(r.out) <= 100);
  }
}
