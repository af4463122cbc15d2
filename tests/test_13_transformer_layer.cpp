// Lesson 13: a Transformer layer in article 001's 2D layout (the layer norms' statistics
// all-reduced over the split embed dim) and in the Megatron layout (four AllReduces, bytes by the
// ring formula), forward and backward verified; a corrupted reference is caught; a mesh that is
// not 2-D is refused.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

TEST_SUITE("lessons") {
  TEST_CASE("lesson 13 (transformer layer) --json: both layouts pass; Megatron's four AllReduces") {
    auto r = run_binary("13_transformer_layer --json");
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    CHECK(j["megatron_collectives"] == 4);
    // att, ff, df, da: [2, 8, 16] floats = 1024 B each, all-reduced over 8: 2 (n-1)/n of it.
    CHECK(j["megatron_bytes_per_device"] == 4 * (2 * 7 * 1024 / 8));
    // Central differences check the gradient rules, the same in both layouts: reported once, under
    // their own name, and not among either layout's checks.
    int rules = 0, per_layout = 0;
    for (const auto& c : j["checks"]) {
      const std::string name = c["name"];
      rules += name.rfind("gradient rules: ", 0) == 0 && name.find("central differences") != std::string::npos;
      per_layout += name.rfind("gspmd_2d: ", 0) == 0 && name.find("central differences") != std::string::npos;
    }
    CHECK(rules == 11);
    CHECK(per_layout == 0);
  }

  TEST_CASE("lesson 13 (transformer layer) text: where the collectives come from, the verdict") {
    auto r = run_binary("13_transformer_layer");
    CHECK(r.status == 0);
    for (const char* s : {"all_reduce mu1, all_reduce var1, all_reduce mu2, all_reduce var2",
                          "forward   attention  1 all_reduce", "backward  ffn        1 all_reduce",
                          "megatron: one AllReduce per sublayer each way: PASS", "gspmd_2d: 14 of 14 checks pass",
                          "in every layout): 11 of 11 pass", "Takeaway:", "Next:",
                          "\nPASS 13_transformer_layer"})
      CHECK_MESSAGE(r.out.find(s) != std::string::npos, s);
    CHECK(run_binary("13_transformer_layer --inject perturb:1e-3 --quiet").status == 1);
    auto line = run_binary("13_transformer_layer --mesh Y=4");
    CHECK(line.status == 2);
    CHECK(count_lines(line.err) == 1);
    CHECK(line.out.empty());
  }

  TEST_CASE("lesson 13 on one device (--mesh X=1,Y=1): nothing moves, and that passes") {
    const auto r = run_binary("13_transformer_layer --mesh X=1,Y=1 --json");
    CHECK(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    bool said = false;
    for (const auto& c : j["checks"]) said = said || c["name"] == "megatron: on one device nothing moves";
    CHECK(said);
  }

  TEST_CASE("lesson 13's gspmd_2d layout and harness/cases/transformer_gspmd.toml are one plan; --json names each "
            "collective's layout") {
    const auto lesson = nlohmann::json::parse(run_binary("13_transformer_layer --json").out);
    const auto file = nlohmann::json::parse(run_binary("shardlab run harness/cases/transformer_gspmd.toml --json").out);
    CHECK(file["bytes_per_device"] == lesson["gspmd_2d_bytes_per_device"]);
    CHECK(file["collectives"].size() == lesson["gspmd_2d_collectives"]);
    int gspmd = 0, megatron = 0;
    for (const auto& c : lesson["collectives"]) {
      gspmd += c["run"] == "gspmd_2d";
      megatron += c["run"] == "megatron";
    }
    CHECK(gspmd == lesson["gspmd_2d_collectives"]);
    CHECK(megatron == 4);
  }
}
