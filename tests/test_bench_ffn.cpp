// harness/models/bench_ffn.cpp through `shardlab bench ffn`: every check in a table with its power,
// within 100 columns, and the same figures under --json.
#include <doctest/doctest.h>

#include <sstream>
#include <string>

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
