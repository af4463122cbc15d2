// harness/cli/cmd_zero.cpp: `shardlab zero` as a user meets it: the ZeRO paper's example in the
// table and in JSON; bad values exit 2 with one sentence and print nothing else.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

TEST_CASE("shardlab zero: 7.5B on 64 devices prints 120.0, 31.4, 16.6 and 1.9 GB per device") {
  const auto r = run_binary("shardlab zero --params 7.5B --devices 64");
  REQUIRE(r.status == 0);
  for (const char* row : {"plain DP       15.0      15.0          90.0          120.0",
                          "ZeRO-1         15.0      15.0           1.4           31.4",
                          "ZeRO-2         15.0      0.23           1.4           16.6",
                          "ZeRO-3         0.23      0.23           1.4            1.9          44.3  1.50x"})
    CHECK_MESSAGE(r.out.find(row) != std::string::npos, row);
  const auto j = nlohmann::json::parse(run_binary("shardlab zero --params 7.5B --devices 64 --json").out);
  CHECK(j["stages"][3]["memory_bytes"] == 1.875e9);
  CHECK(j["optimizer_state_bytes_per_param"] == 12);
}

TEST_CASE("shardlab zero: one device sends nothing, and its ratio column says so without a NaN") {
  const auto r = run_binary("shardlab zero --params 1e9 --devices 1");
  REQUIRE(r.status == 0);
  CHECK(r.out.find("on 1 device,") != std::string::npos);
  CHECK(r.out.find("nan") == std::string::npos);
  CHECK(r.out.find("plain DP        2.0       2.0          12.0           16.0          0.00  -") != std::string::npos);
}

TEST_CASE("shardlab zero: bad values are one sentence and exit 2") {
  for (const char* args : {"--params 0 --devices 64", "--params abc --devices 4", "--params 7.5B --devices 0",
                           "--params 7.5B --devices 4 --optimizer lion", "--params 1e20 --devices 4",
                           "--params 7.5B", "--params '' --devices 4"}) {
    CAPTURE(args);
    const auto r = run_binary(std::string("shardlab zero ") + args);
    CHECK(r.status == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.out.empty());
  }
}
