// Lesson 20: a mixture of experts, experts over Y, batch over X and Y (X=2,Y=2 by default).
// Expected values by hand: 128 tokens on 4 devices, 32 each; E = 8, top 2: C = 2 x 32 / 8 = 8 at
// capacity factor 1.0, 16 at 2.0. Each AllToAll sends half of [E, C, m] = [8, 8, 8] float32:
// 256 x 4 = 1024 B (2048 B at 2.0). dW_router [8, 8] all-reduced over 4 devices: 2 x 3/4 x 256 =
// 384 B; dW_in, dW_out [4, 8, 16] over X=2: 2 x 1/2 x 2048 = 2048 B each.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>

#include "tests/run_binary.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

TEST_SUITE("lessons") {
  TEST_CASE("lesson 20 (expert parallel) --json: drops at capacity 1.0, none at 2.0, bytes by the formula") {
    auto r = run_binary("20_expert_parallel --json");
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    CHECK(j["capacity"] == 8);
    CHECK(j["dropped"].get<double>() > 0);  // the verdict above holds with tokens dropped
    CHECK(j["dropped"] == j["dropped_cf_1"]);
    CHECK(j["dropped_cf_2"] == 0);
    CHECK(j["assignments"] == 256);
    CHECK(j["all_to_all_bytes_per_device"] == 1024);
    int a2a = 0;
    for (const auto& c : j["collectives"]) {
      if (c["op"] == "all_to_all") {
        ++a2a;
        CHECK(c["bytes_per_device"] == 1024);
      }
      if (c["tensor"] == "dW_router") CHECK(c["bytes_per_device"] == 384);
      if (c["tensor"] == "dW_in" || c["tensor"] == "dW_out") CHECK(c["bytes_per_device"] == 2048);
    }
    CHECK(a2a == 4);
    CHECK(j["bytes_per_device"] == 4 * 1024 + 384 + 2 * 2048);
    for (const auto& c : j["checks"]) CHECK_MESSAGE(c["pass"] == true, c["name"]);
    CHECK(j["checks"].size() == 9);  // 7 tensors, the AllToAll bytes, the gates against a plain top-k
    CHECK(j["checks"][8]["name"] == "gates against a plain softmax-top-k");

    auto two = run_binary("20_expert_parallel --json --capacity-factor 2.0");
    REQUIRE(two.status == 0);
    const auto k = nlohmann::json::parse(two.out);
    CHECK(k["dropped"] == 0);
    CHECK(k["all_to_all_bytes_per_device"] == 2048);
  }

  TEST_CASE("lesson 20 (expert parallel) text, other types and meshes; faults caught; bad input refused") {
    auto r = run_binary("20_expert_parallel");
    CHECK(r.status == 0);
    for (const char* s : {"dW_router PASS (exact, no tolerance)\n",
                          "each AllToAll sends (n-1)/n x E C m elements = 1024 B per device: PASS (exact, no tolerance)",
                          "gates against a plain softmax-top-k: PASS max_abs_err=2.8e-08 (catches a gate off by more than",
                          "capacity factor  C   dropped  AllToAll bytes/device", "Takeaway:", "Next:",
                          "\nPASS 20_expert_parallel"})
      CHECK_MESSAGE(r.out.find(s) != std::string::npos, s);
    // As tests/test_lesson_commands.cpp holds every lesson to: 100 columns, sections in order, and
    // the Next: command runs as printed.
    std::istringstream in(r.out);
    int section = 0;
    for (std::string line; std::getline(in, line);) {
      CHECK_MESSAGE(line.size() <= 100, line);
      if (line.size() > 2 && line[0] >= '1' && line[0] <= '9' && line[1] == '.') {
        CHECK(line[0] - '0' == section + 1);
        section = line[0] - '0';
      }
    }
    CHECK(section == 6);
    const auto next = r.out.find("Next:     build/bin/20_expert_parallel --capacity-factor 2.0\n");
    REQUIRE(next != std::string::npos);
    CHECK(run_binary("20_expert_parallel --capacity-factor 2.0 --quiet").status == 0);
    REQUIRE(r.out.find("Exercise: build/bin/shardlab exercise --lesson 20\n") != std::string::npos);
    // Three cases, something moves in each: "none" passes none of them.
    int passed_by_none = 0;
    for (int seed = 0; seed < 3; ++seed) {
      const int status = run_binary("shardlab exercise --lesson 20 --answer none --seed " + std::to_string(seed)).status;
      CHECK((status == 0 || status == 1));
      passed_by_none += status == 0;
    }
    CHECK(passed_by_none == 0);
    CHECK(run_binary("20_expert_parallel --dtype bfloat16 --quiet").status == 0);
    CHECK(run_binary("20_expert_parallel --dtype float64 --mesh X=2,Y=4 --quiet").status == 0);
    CHECK(run_binary("20_expert_parallel --mesh Y=4 --experts 4 --top-k 1 --seed 5 --quiet").status == 0);
    for (const char* k : {"perturb:1e-3", "skip-add", "swap-blocks", "wrong-axis"})
      CHECK_MESSAGE(run_binary(std::string("20_expert_parallel --quiet --inject ") + k).status == 1, k);
    for (const char* bad : {"--experts 6 --mesh Y=4", "--top-k 0", "--capacity-factor x", "--mesh X=2,Y=2,Z=2"}) {
      auto b = run_binary(std::string("20_expert_parallel ") + bad);
      CHECK_MESSAGE(b.status == 2, bad);
      CHECK(count_lines(b.err) == 1);
      CHECK(b.out.empty());
    }
  }

  TEST_CASE("lesson 20 prints an AllToAll's buffer and the 7/8 of it that leaves the device, the bytes priced") {
    const auto r = run_binary("20_expert_parallel --json");
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["moe_sent_mib"].get<double>() == doctest::Approx(j["moe_buffer_mib"].get<double>() * 7 / 8));
    const std::string text = shardlab::testing::flat(run_binary("20_expert_parallel").out);
    CHECK(text.find(" = 80 MiB per device (C = 160), of which the 7/8 for other devices, 70 MiB, leaves it") !=
          std::string::npos);
  }
}
