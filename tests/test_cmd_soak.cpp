// shardlab soak: random cases, each verified; memory watched; bad values refused.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"
#include "tests/verdict_powers.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

TEST_CASE("shardlab soak --cases: every random case verified, the count as asked, memory flat") {
  const auto r = run_binary("shardlab soak --cases 60 --seed 3 --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["pass"] == true);
  CHECK(j["cases_run"] == 60);  // cases run, not draws: draws whose specs do not divide are no case
  CHECK(j["cases_passed"] == 60);
  CHECK(j["cases_skipped"].get<int>() < 40);  // most draws divide their shapes
  // Every fourth draw is a program (FFN or attention, backward too): some of the 60 are.
  CHECK(j["programs_run"].get<int>() >= 5);
  CHECK(j["weakest_power"]["float32"].get<double>() <= 1e-3);
  CHECK(j["rss_growth"].get<double>() < 0.05);  // 0 when not judged (sanitizer builds)
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  CHECK(j["rss_judged"] == true);  // a sanitizer's allocator grows resident memory by itself
#endif
  // Each type's cases add up to the run's, and its seconds to at most the run's.
  int per_type = 0;
  double seconds = 0;
  REQUIRE(j.contains("types"));
  for (const auto& [name, t] : j["types"].items()) {
    CAPTURE(name);
    CHECK(t["cases_passed"] == t["cases_run"]);
    CHECK(t["seconds"].get<double>() > 0);
    per_type += t["cases_run"].get<int>();
    seconds += t["seconds"].get<double>();
  }
  CHECK(per_type == 60);
  CHECK(seconds <= j["seconds"].get<double>());
  const auto text = run_binary("shardlab soak --cases 30");
  CHECK(text.out.find("PASS soak: ") != std::string::npos);
  CHECK(text.out.find("cases  passed  seconds  weakest catches") != std::string::npos);
  CHECK(shardlab::testing::verdicts_without_power(text.out).empty());  // the verdict names the weakest check's power
}

TEST_CASE("shardlab soak --dtype: every case in the type asked, its weakest check at its floor") {
  for (const std::string t : {"float64", "bfloat16"}) {
    CAPTURE(t);
    const auto r = run_binary("shardlab soak --cases 12 --seed 5 --json --dtype " + t);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(j.contains("types"));
    REQUIRE(j["types"].contains(t));
    CHECK(j["types"].size() == 1);
    // The cases' seconds are a part of the run's, measured on one clock (no share of it is
    // asserted: that would depend on the machine's load).
    CHECK(j["types"][t]["seconds"].get<double>() > 0);
    CHECK(j["types"][t]["seconds"].get<double>() <= j["seconds"].get<double>());
    CHECK(j["types"][t]["cases_run"] == 12);
    CHECK(j["types"][t]["cases_passed"] == 12);
    CHECK(j["weak_checks"] == 0);
  }
}

TEST_CASE("shardlab soak: a duration too short for a case is refused before it starts, never by the clock") {
  // Refused by the rule, not by a race: the same answer on every run and every machine load.
  for (const std::string minutes : {"0.0000001", "0.009"}) {
    CAPTURE(minutes);
    const auto r = run_binary("shardlab soak --minutes " + minutes);
    CHECK(r.status == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find("give at least 0.01") != std::string::npos);
    CHECK(r.out.empty());
  }
  // The shortest duration allowed still verifies at least one case, however slow the machine.
  const auto r = run_binary("shardlab soak --minutes 0.01 --seed 4 --json");
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["cases_run"].get<int>() >= 1);
}

TEST_CASE("shardlab soak: bad values are one sentence and exit 2") {
  for (const std::string args : {"--minutes 0", "--minutes -1", "--minutes nan", "--cases -1", "--backend mpi",
                                 "--backend gpu", "--seed -1", "--dtype float16", "--dtype"}) {
    CAPTURE(args);
    const auto r = run_binary("shardlab soak " + args);
    CHECK(r.status == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.out.empty());
  }
}
