// harness/models/bench_ffn.cpp through `shardlab bench ffn`: every check in a table with its power,
// within 100 columns, and the same figures under --json; --steps N's warm steps.
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"

using shardlab::testing::run_binary;

TEST_CASE("bench ffn: each check's power in the table and in JSON; sketch checks within the float32 floor at a small size") {
  for (const std::string verify : {"sketch", "full"}) {
    const std::string run = "shardlab bench ffn --dims B=2,S=8,M=16,H=64 --backward --verify " + verify;
    const auto text = run_binary(run);
    CAPTURE(text.out);
    REQUIRE(text.status == 0);
    std::istringstream lines(text.out);
    std::string line;
    bool header = false;
    while (std::getline(lines, line)) {
      CHECK_MESSAGE(line.size() <= 100, line);
      header = header || line.find("verdict  max err") != std::string::npos;
    }
    CHECK(header);
    CHECK(text.out.find("power: the weakest check") != std::string::npos);
    CHECK(text.out.find("WEAK") == std::string::npos);

    const auto json = run_binary(run + " --json");
    REQUIRE(json.status == 0);
    const auto j = nlohmann::json::parse(json.out);
    REQUIRE(j["checks"].is_array());
    int compared = 0;
    for (const auto& c : j["checks"]) {
      CHECK(c["pass"] == true);
      if (!c.contains("power")) continue;  // collectives and memory as planned: not a comparison of values
      ++compared;
      REQUIRE(c["power"].is_number());
      CHECK(c["power"].get<double>() <= c["power_floor"].get<double>());
      CHECK(c["weak"] == false);
    }
    CHECK(compared >= (verify == "sketch" ? 8 : 4));
    // total / floor and the first-touch line, from the figures printed beside them.
    const double floor = j["floor_seconds"].get<double>(), total = j["seconds_total"].get<double>();
    CHECK(j["total_over_floor"].get<double>() == doctest::Approx(total / floor));
    const double first = j["first_touch_bytes_per_s"].get<double>();
    REQUIRE(first > 0);
    CHECK(j["touch_again_bytes_per_s"].get<double>() > 0);
    const double touch = j["planned_bytes"].get<double>() / first / j["cores"].get<double>();
    CHECK(j["first_touch_seconds"].get<double>() == doctest::Approx(touch));
    CHECK(j["total_over_floor_and_touch"].get<double>() == doctest::Approx(total / (floor + touch)));
    CHECK(text.out.find("total / floor = ") != std::string::npos);
    CHECK(text.out.find("first touch: fresh memory is written at ") != std::string::npos);
  }
}

TEST_CASE("bench ffn --steps N: N warm steps after the first, each with its GFLOP/s per device and its ratio to the floor") {
  const std::string run = "shardlab bench ffn --dims B=2,S=8,M=16,H=64 --backward --verify full --steps 3";
  const auto text = run_binary(run);
  CAPTURE(text.out);
  REQUIRE(text.status == 0);
  std::istringstream lines(text.out);
  std::string line;
  int warm_rows = 0, cold_rows = 0;
  while (std::getline(lines, line)) {
    CHECK_MESSAGE(line.size() <= 100, line);
    warm_rows += line.find(" (warm)") != std::string::npos;
    cold_rows += line.find("1 (cold)") != std::string::npos;
  }
  CHECK(cold_rows == 1);
  CHECK(warm_rows == 3);
  CHECK(text.out.find("warm step / floor = ") != std::string::npos);
  CHECK(text.out.find("GFLOP/s per device") != std::string::npos);

  const auto json = run_binary(run + " --json");
  REQUIRE(json.status == 0);
  const auto j = nlohmann::json::parse(json.out);
  CHECK(j["steps"] == 3);
  REQUIRE(j["step_seconds"].size() == 3);
  REQUIRE(j["step_gflops_per_device"].size() == 3);
  // GFLOP/s per device = the layer's FLOPs / devices / seconds (the figures printed beside it).
  const double per_device = j["flops"].get<double>() / j["devices"].get<double>();
  std::vector<double> seconds;
  for (std::size_t i = 0; i < 3; ++i) {
    const double s = j["step_seconds"][i].get<double>();
    REQUIRE(s > 0);
    seconds.push_back(s);
    CHECK(j["step_gflops_per_device"][i].get<double>() == doctest::Approx(per_device / s / 1e9));
  }
  std::sort(seconds.begin(), seconds.end());
  CHECK(j["warm_over_floor"].get<double>() == doctest::Approx(seconds[1] / j["floor_seconds"].get<double>()));
  // Each warm step's CPU time, and the median against the FLOPs at the one-core CPU rate.
  REQUIRE(j["step_cpu_seconds"].size() == 3);
  std::vector<double> cpu;
  for (const auto& c : j["step_cpu_seconds"]) cpu.push_back(c.get<double>());
  for (double c : cpu) CHECK(c > 0);
  std::sort(cpu.begin(), cpu.end());
  const double cpu_floor = j["flops"].get<double>() / (j["single_core_cpu_gflops"].get<double>() * 1e9);
  CHECK(j["warm_cpu_over_cpu_floor"].get<double>() == doctest::Approx(cpu[1] / cpu_floor));
  CHECK(text.out.find("in CPU time: the median warm step took") != std::string::npos);
  // Without --steps: no warm step, and the JSON says so.
  const auto none = nlohmann::json::parse(run_binary("shardlab bench ffn --dims B=2,S=8,M=16,H=64 --json").out);
  CHECK(none["steps"] == 0);
  CHECK(none["step_seconds"].empty());
  CHECK_FALSE(none.contains("warm_over_floor"));
  CHECK_FALSE(none.contains("warm_cpu_over_cpu_floor"));
}

TEST_CASE("bench ffn --steps refuses a negative or non-numeric count in one sentence, exit 2") {
  for (const std::string bad : {"-1", "x", "2.5"}) {
    const auto r = run_binary("shardlab bench ffn --dims B=2,S=8,M=16,H=64 --steps " + bad);
    CAPTURE(bad);
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}
