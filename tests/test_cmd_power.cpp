// shardlab power (harness/cli/cmd_power.cpp): the matrix of planted faults. A quick subset must
// catch every fault it plants (make test fails below 100%), and a check known to be WEAK must show
// up as an escape (so the command can fail).
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "tests/run_binary.hpp"

using shardlab::testing::run_binary;

TEST_SUITE("cmd power") {
  TEST_CASE("shardlab power: lessons 02, 12, 16 and 17 and a case file catch every planted fault") {
    auto r = run_binary("shardlab power --lesson 02 --lesson 12 --lesson 16 --lesson 17 --dtype float32 --dtype float64 "
                        "harness/cases/gspmd_ffn_backward.toml --json");
    CAPTURE(r.out);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["escaped"] == 0);
    CHECK(j["errors"] == 0);
    CHECK(j["score_percent"].get<double>() == 100.0);
    // 4 lessons and 1 case, each in 2 types, each clean + 8 faults.
    CHECK(j["runs"].size() == 10 * 9);
    int case_runs = 0;
    for (const auto& run : j["runs"])
      if (run["target"] == "gspmd_ffn_backward") {
        ++case_runs;
        CHECK((run["dtype"] == "float32" || run["dtype"] == "float64"));
      }
    CHECK(case_runs == 2 * 9);
    int caught = 0;
    for (const auto& run : j["runs"]) {
      if (run["inject"] == "none") CHECK(run["result"] == "PASS");
      if (run["result"] == "caught") {
        ++caught;
        CHECK(!run["caught_by"].get<std::string>().empty());
      }
    }
    CHECK(caught == j["caught"].get<int>());
    CHECK(caught >= 30);  // perturb everywhere; skip-add, gather and stale in 02, 12, 17 and the case; ...
    // Each kind that has a place is planted somewhere: skip-update in 17, a stash mix-up in 16,
    // an all_to_all's blocks in 12.
    for (const char* kind : {"skip-update", "swap-microbatches", "swap-blocks"}) {
      bool seen = false;
      for (const auto& run : j["runs"]) seen = seen || (run["inject"] == kind && run["result"] == "caught");
      CAPTURE(kind);
      CHECK(seen);
    }
  }

  TEST_CASE("shardlab power: a WEAK check lets a perturbation at the floor through, and says so") {
    // Lesson 11 in bfloat16 without its replay: the rounding bound against the unsharded reference
    // alone is above the 3e-2 floor (docs/verification.md: the replay). With the replay it is caught.
    auto r = run_binary("shardlab power --lesson 11 --dtype bfloat16 --kinds perturb --replay off");
    CHECK(r.status == 1);
    CHECK(r.out.find("ESCAPED: ") != std::string::npos);
    CHECK(r.out.find("--replay off") != std::string::npos);  // the escape's command, as it runs
    CHECK(r.out.find("FAIL power: 0 of 1 planted faults caught (0.0%), 1 escaped") != std::string::npos);
    auto replayed = run_binary("shardlab power --lesson 11 --dtype bfloat16 --kinds perturb");
    CHECK(replayed.status == 0);
    CHECK(replayed.out.find("PASS power: 1 of 1 planted faults caught (100.0%)") != std::string::npos);
  }

  TEST_CASE("shardlab power: bad lessons, kinds and files are one sentence, exit 2") {
    for (const char* bad : {"shardlab power --lesson 99", "shardlab power --kinds skip", "shardlab power /nonexistent.toml",
                            "shardlab power --dtype float16"}) {
      CAPTURE(bad);
      auto r = run_binary(bad);
      CHECK(r.status == 2);
      CHECK(r.out.empty());
    }
  }
}
