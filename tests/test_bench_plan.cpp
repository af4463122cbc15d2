// harness/cli/bench_plan.cpp: `shardlab bench plan` times searches it really ran (each row's counts add
// up, the slowest case it prints runs as printed and explores as many layouts), and refuses bad input.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "harness/cli/bench_plan.hpp"
#include "tests/run_binary.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

TEST_CASE("bench plan: every case searched or refused; the slowest case reruns as printed") {
  const auto r = run_binary("shardlab bench plan --meshes 'X=2,Y=2;W=2,X=2,Y=2,Z=2' --cases 6 --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["rows"].size() == 2);
  for (const auto& row : j["rows"]) {
    CHECK(row["searched"].get<int>() + row["refused"].get<int>() == 6);
    CHECK(row["median_ms"].get<double>() <= row["max_ms"].get<double>());
    CHECK(row["median_layouts"].get<double>() <= row["max_layouts"].get<double>());
    CHECK(row["cpu_median_ms"].get<double>() <= row["cpu_max_ms"].get<double>());
    CHECK(row["cpu_max_ms"].get<double>() <= j["cpu_max_ms"].get<double>());
  }
  // The verdict: both targets, judged on the worst row's CPU figures.
  CHECK(j["pass"].get<bool>() == (j["cpu_median_ms"].get<double>() < j["target_median_ms"].get<double>() &&
                                  j["cpu_max_ms"].get<double>() < j["target_max_ms"].get<double>()));
  CHECK(j["target_median_ms"].get<double>() == 15);
  CHECK(j["target_max_ms"].get<double>() == 50);
  const std::string slowest = j["rows"][1]["slowest"];
  REQUIRE(!slowest.empty());
  const auto again = run_binary("shardlab einsum " + slowest);
  CHECK(again.status == 0);
  CHECK(again.out.find("layouts explored") != std::string::npos);
  const auto text = run_binary("shardlab bench plan --meshes X=2,Y=2 --cases 3");
  CHECK(text.status == 0);
  CHECK(text.out.find("ms (target < 15), slowest ") != std::string::npos);
  CHECK(text.out.find("ms (target < 50)\n") != std::string::npos);
}

TEST_CASE("bench plan: bad input exits 2 with one sentence") {
  for (const std::string args : {"--cases 0", "--meshes X=0", "--meshes 'X=2;Q'"}) {
    CAPTURE(args);
    const auto r = run_binary("shardlab bench plan " + args);
    CHECK(r.status == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.out.empty());
  }
}

TEST_CASE("bench plan: a mesh on which every case is refused gives no timing: one sentence, exit 2") {
  // 7 and 9 divide no dim of 256: every random spec that uses an axis is refused, and with two
  // axes every draw here uses one. A "slowest search 0.0 ms" over nothing would be a false figure.
  const auto r = shardlab::testing::run_binary("shardlab bench plan --cases 5 --meshes X=7,Y=9");
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(shardlab::testing::count_lines(r.err) == 1);
  CHECK(r.err.find("searched nothing on mesh X=7,Y=9") != std::string::npos);
}
