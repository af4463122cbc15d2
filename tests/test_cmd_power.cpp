// shardlab power (harness/cli/cmd_power.cpp): the matrix of planted faults. A quick subset must
// catch every fault it plants (make test fails below 100%), and a check known to be WEAK must show
// up as an escape (so the command can fail).
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <unistd.h>

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

  TEST_CASE("shardlab power: perturb is planted at the power each clean run claims; a WEAK clean run fails") {
    // Lesson 11 in bfloat16 against its replay claims power 0: the perturbation is two unit
    // roundoffs (2^-7), far under the 3e-2 floor, and caught.
    auto replayed = run_binary("shardlab power --lesson 11 --dtype bfloat16 --kinds perturb --json");
    REQUIRE(replayed.status == 0);
    const auto j = nlohmann::json::parse(replayed.out);
    CHECK(j["runs"][1]["inject"] == "perturb:0.0078125");
    CHECK(j["runs"][1]["result"] == "caught");
    // float32: the clean run's weakest claim, printed in its JSON, is the size planted.
    const auto clean = nlohmann::json::parse(run_binary("11_propagation --dtype float32 --json").out);
    auto f32 = nlohmann::json::parse(run_binary("shardlab power --lesson 11 --dtype float32 --kinds perturb --json").out);
    const double planted = std::stod(f32["runs"][1]["inject"].get<std::string>().substr(8));
    CHECK(planted == doctest::Approx(std::max(clean["power"].get<double>(), 2 * 5.9604644775390625e-08)));
    CHECK(f32["runs"][1]["result"] == "caught");
    // Without the replay the rounding bound alone is above the floor: the clean run is WEAK, which fails.
    auto off = run_binary("shardlab power --lesson 11 --dtype bfloat16 --kinds perturb --replay off");
    CHECK(off.status == 1);
    CHECK(off.out.find("clean run FAIL: ") != std::string::npos);
    CHECK(off.out.find("--replay off") != std::string::npos);  // the failing command, as it runs
  }

  TEST_CASE("shardlab power: a request that plants nothing is refused, naming the kinds that apply; under mpiexec "
            "one report") {
    auto none = run_binary("shardlab power --lesson 19 --dtype float64 --kinds skip-update");
    CHECK(none.status == 2);
    CHECK(none.out.empty());
    CHECK(none.err.find("--kinds skip-update finds no place in these runs") != std::string::npos);
    CHECK(none.err.find("the kinds that apply: perturb, ") != std::string::npos);
    CHECK(none.err.find("skip-update,") == std::string::npos);
    // A case file that refuses its input refuses the request: its sentence, exit 2.
    const std::string bad = "/tmp/shardlab_power_bad_" + std::to_string(::getpid()) + ".toml";
    if (FILE* f = std::fopen(bad.c_str(), "w")) {
      std::fputs("x = \n", f);
      std::fclose(f);
    }
    auto refused = run_binary("shardlab power " + bad + " --dtype float64");
    std::remove(bad.c_str());
    CHECK(refused.status == 2);
    CHECK(refused.out.empty());
    CHECK(refused.err.find("refused its input: ") != std::string::npos);
    auto mpi = run_binary("shardlab power --lesson 02 --dtype float64 --kinds skip-add",
                          shardlab::testing::clean_env() + "mpiexec -n 2 ");
    CHECK(mpi.status == 0);
    std::size_t reports = 0;
    for (std::size_t at = 0; (at = mpi.out.find("PASS power: ", at)) != std::string::npos; ++at) ++reports;
    CHECK(reports == 1);
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
