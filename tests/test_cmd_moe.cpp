// harness/cli/cmd_moe.cpp: `shardlab moe` runs lesson 20's mixture of experts. Expected by hand on
// X=4,Y=2 (8 devices, 16 tokens each, E = 8, top 2): C = 2 x 16 / 8 = 4 at capacity factor 1,
// each AllToAll sends half of [8, 4, 8] float64 elements: 128 x 8 = 1024 B.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <string>

#include "tests/run_binary.hpp"
#include "tests/verdict_powers.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

TEST_CASE("shardlab moe: --json verdict, capacity and bytes; --trace written; --inject caught; bad input refused") {
  auto r = run_binary("shardlab moe --mesh X=4,Y=2 --dtype float64 --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["case"] == "moe");
  CHECK(j["pass"] == true);
  CHECK(j["capacity"] == 4);
  CHECK(j["all_to_all_bytes_per_device"] == 1024);
  CHECK(j["dropped"].get<double>() > 0);
  for (const auto& c : j["collectives"])
    if (c["op"] == "all_to_all") CHECK(c["bytes_per_device"] == 1024);

  const std::string trace = "/tmp/shardlab_test_moe_trace_" + std::to_string(::getpid()) + ".json";
  CHECK(run_binary("shardlab moe --quiet --trace " + trace).status == 0);
  std::ifstream in(trace);
  REQUIRE(in.good());
  const auto t = nlohmann::json::parse(in);
  CHECK(t.dump().find("x_dispatch") != std::string::npos);
  std::remove(trace.c_str());

  auto text = run_binary("shardlab moe");
  CHECK(text.out.find("dW_router PASS (exact, no tolerance)\n") != std::string::npos);
  CHECK(text.out.find("gates against a plain softmax-top-k: PASS max_abs_err=") != std::string::npos);
  CHECK(shardlab::testing::verdicts_without_power(text.out).empty());  // "0 x RMS" too
  CHECK(text.out.find("\nPASS moe") != std::string::npos);
  for (const char* k : {"perturb:1e-3", "swap-blocks", "skip-add"})
    CHECK_MESSAGE(run_binary(std::string("shardlab moe --quiet --inject ") + k).status == 1, k);
  for (const char* bad : {"--experts 7", "--top-k 0", "--capacity-factor 0", "--mesh X=2,Y=2,Z=2"}) {
    auto b = run_binary(std::string("shardlab moe ") + bad);
    CHECK_MESSAGE(b.status == 2, bad);
    CHECK(count_lines(b.err) == 1);
    CHECK(b.out.empty());
  }
}
