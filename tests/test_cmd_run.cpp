// harness/cli/cmd_run.cpp: `shardlab run FILE.toml` as a new user meets it: the shipped GSPMD case
// passes with the article's four collectives; a byte budget too small fails with a sentence naming
// both counts; a typo in an op name exits 2 naming the file, the line and the op.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>
#include <unistd.h>

#include "core/text.hpp"
#include "tests/run_binary.hpp"
#include "tests/verdict_powers.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

namespace {

const std::string kCase = "harness/cases/gspmd_ffn.toml";

// A shipped case (gspmd_ffn by default) with each `from` replaced by its `to`, written to a file
// of its own.
std::string variant(const std::vector<std::pair<std::string, std::string>>& edits, const std::string& file = kCase) {
  std::string text = shardlab::read_text_file(file, "case");
  for (const auto& [from, to] : edits) {
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
  }
  static int n = 0;
  const std::string path = "/tmp/shardlab_case_" + std::to_string(::getpid()) + "_" + std::to_string(n++) + ".toml";
  std::ofstream(path) << text;
  return path;
}

std::string variant(const std::string& from, const std::string& to) { return variant({{from, to}}); }

}  // namespace

TEST_CASE("shardlab run: the GSPMD FFN case annotates 3 tensors and makes the article's collectives") {
  const auto r = run_binary("shardlab run " + kCase);
  CAPTURE(r.out);
  CHECK(r.status == 0);
  for (const char* s : {"Specs (3 of 6 tensors annotated", "y       bsm   y[B_X, S, M_Y]   like x (same dims bsm)",
                        "expect.collectives: PASS", "PASS gspmd_ffn"})
    CHECK_MESSAGE(r.out.find(s) != std::string::npos, s);
  CHECK(shardlab::testing::verdicts_without_power(r.out).empty());  // every verdict line states its power
  const auto j = nlohmann::json::parse(run_binary("shardlab run " + kCase + " --json").out);
  CHECK(j["pass"] == true);
  REQUIRE(j["collectives"].size() == 4);
  CHECK(j["collectives"][3]["op"] == "reduce_scatter");
  CHECK(j["collectives"][3]["tensor"] == "y");
  CHECK(j["specs"]["g"]["spec"] == "X,_,Y");
  CHECK(j["annotated_tensors"] == 3);
  const auto plan = run_binary("shardlab run " + kCase + " --plan-only --explain");
  CHECK(plan.status == 0);
  CHECK(plan.out.find("op 3 (y = einsum bsh,hm->bsm") != std::string::npos);
  // A plan_only case: its expectations held to the plan, exactly.
  const auto esm2 = run_binary("shardlab run harness/cases/esm2_layer.toml");
  CHECK(esm2.out.find("\nPASS esm2_layer (planned, not run; exact, no tolerance)\n") != std::string::npos);
  CHECK(shardlab::testing::verdicts_without_power(esm2.out).empty());
}

TEST_CASE("shardlab run: a byte budget too small fails naming the measured and allowed bytes") {
  const auto r = run_binary("shardlab run " + variant("max_bytes_per_device = 8192", "max_bytes_per_device = 2000"));
  CHECK(r.status == 1);
  CHECK(shardlab::testing::flat(r.out).find("the run sent 2560 bytes per device (the busiest), more than the 2000 allowed") != std::string::npos);
  const auto order = run_binary("shardlab run " + variant("\"all_gather W_in over X\", \"all_gather W_out", "\"all_gather W_out over X\", \"all_gather W_in"));
  CHECK(order.status == 1);
  CHECK(shardlab::testing::flat(order.out).find("collective 2 is 'all_gather W_in over X', the file expects 'all_gather W_out over X'") !=
        std::string::npos);
}

TEST_CASE("shardlab run --dtype: the case in another element type; the byte budget holds as many elements") {
  // float32 sends 2560 bytes per device (640 elements): float64 sends 5120, bfloat16 1280.
  const auto f64 = run_binary("shardlab run --json --dtype float64 " + variant("max_bytes_per_device = 8192", "max_bytes_per_device = 2560"));
  CHECK(f64.status == 0);
  const auto j = nlohmann::json::parse(f64.out);
  CHECK(j["dtype"] == "float64");
  const auto bf16 = run_binary("shardlab run --dtype bfloat16 " + variant("max_bytes_per_device = 8192", "max_bytes_per_device = 2560"));
  CHECK(bf16.status == 0);
  CHECK(bf16.out.find("element type: bfloat16") != std::string::npos);
  // Replayed, so exact by replay (never "0 x RMS"); the rounding check states its claim.
  CHECK(bf16.out.find("exact by replay") != std::string::npos);
  CHECK(shardlab::testing::verdicts_without_power(bf16.out).empty());
  // 2559 bytes hold 639 float32 elements: 1278 bytes of bfloat16, under the 1280 sent.
  const auto tight = run_binary("shardlab run --dtype bfloat16 " + variant("max_bytes_per_device = 8192", "max_bytes_per_device = 2559"));
  CHECK(tight.status == 1);
  CHECK(shardlab::testing::flat(tight.out).find("the run sent 1280 bytes per device (the busiest), more than the 1278 allowed "
                                                 "(the file's limit for float32, scaled to bfloat16)") != std::string::npos);
  // Its own type changes nothing: the limit stays the file's 2559 bytes, nothing scaled.
  const auto own = run_binary("shardlab run --dtype float32 " + variant("max_bytes_per_device = 8192", "max_bytes_per_device = 2559"));
  CHECK(own.status == 1);
  CHECK(shardlab::testing::flat(own.out).find("more than the 2559 allowed") != std::string::npos);
  CHECK(own.out.find("scaled") == std::string::npos);
  const auto bad = run_binary("shardlab run --dtype float16 " + kCase);
  CHECK(bad.status == 2);
  CHECK(count_lines(bad.err) == 1);
  CHECK(bad.err.find("--dtype") != std::string::npos);
}

TEST_CASE("shardlab run: bad files exit 2 with one sentence naming the file and line") {
  const std::string typo = variant("op = \"gelu\"", "op = \"gelo\"");
  const auto r = run_binary("shardlab run " + typo);
  CHECK(r.status == 2);
  CHECK(count_lines(r.err) == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find(typo + ": op 2 (g = gelo, line 12)") != std::string::npos);
  CHECK(r.err.find("'gelo' is not an op") != std::string::npos);
  for (const std::string& bad : {variant("backward = false", "backward = \"yes\""), variant("X,_,Y", "X,_,Q"),
                                 std::string("/nonexistent.toml")}) {
    const auto b = run_binary("shardlab run " + bad);
    CAPTURE(b.err);
    CHECK(b.status == 2);
    CHECK(count_lines(b.err) == 1);
    CHECK(b.out.empty());
  }
}

TEST_CASE("shardlab run: a dim that does not divide its axis splits as torch.chunk by default, as matmul does") {
  // attention_megatron.toml with 12 heads on Y=8 and no uneven key: blocks of ceil(12/8) = 2 heads.
  const std::string path = variant({{"mesh = \"Y=4\"", "mesh = \"Y=8\""}, {"n = 4,", "n = 12,"}},
                                   "harness/cases/attention_megatron.toml");
  const auto r = run_binary("shardlab run " + path);
  CAPTURE(r.out);
  CAPTURE(r.err);
  CHECK(r.status == 0);
  CHECK(r.out.find("Uneven blocks (uneven = \"chunk\"") != std::string::npos);
  // --uneven none refuses the same file in one sentence; a bad word exits 2 before anything runs.
  const auto none = run_binary("shardlab run " + path + " --uneven none");
  CHECK(none.status == 2);
  CHECK(count_lines(none.err) == 1);
  const auto bad = run_binary("shardlab run " + path + " --uneven sideways");
  CHECK(bad.status == 2);
  CHECK(bad.err.find("--uneven is 'sideways'") != std::string::npos);
  CHECK(bad.out.empty());
  const auto check_bad = run_binary("shardlab check " + path + " --uneven sideways");
  CHECK(check_bad.status == 2);
  CHECK(check_bad.out.empty());
  std::remove(path.c_str());
}
