// Lesson 12: attention sharded by heads (Megatron), in article 001's 2D layout and by keys; each
// layout forward and backward verified; by heads exactly one AllReduce each way, whose bytes follow
// the ring formula; a corrupted reference is caught; a mesh that is not 2-D is refused.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

TEST_SUITE("lessons") {
  TEST_CASE("lesson 12 (attention) --json: three layouts pass; by heads one AllReduce each way") {
    auto r = run_binary("12_attention --json");
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    // y and dx are [2, 8, 16] floats = 1024 B, all-reduced over 8 devices: 2 (n-1)/n of them each.
    CHECK(j["megatron_bytes_per_device"] == 2 * (2 * 7 * 1024 / 8));
    // 8 per layout (y, 5 gradients, ledger, memory), the 5 gradient rules once (central differences
    // are the program's, not a layout's), and megatron's one AllReduce each way
    int checks = 0, rules = 0;
    for (const auto& c : j["checks"]) {
      checks += c["pass"] == true ? 1 : 0;
      rules += c["name"].get<std::string>().rfind("gradient rules: ", 0) == 0;
    }
    CHECK(checks == 3 * 8 + 5 + 1);
    CHECK(rules == 5);
  }

  TEST_CASE("lesson 12 (attention) text: the specs, the collectives by layout, the verdict") {
    auto r = run_binary("12_attention");
    CHECK(r.status == 0);
    for (const char* s : {"scores  bnst  _,(X,Y),_,_  X,Y,_,_   _,_,_,(X,Y)", "megatron forward:  all_reduce y over X,Y",
                          "backward: all_reduce dx over X,Y", "all_reduce_max row_max over X,Y",
                          "megatron: one AllReduce forward and one backward: PASS", "megatron: 8 of 8 checks pass",
                          "in every layout): 5 of 5 pass",
                          "Takeaway:", "Next:", "\nPASS 12_attention"})
      CHECK_MESSAGE(r.out.find(s) != std::string::npos, s);
    for (std::size_t at = 0, next; at < r.out.size(); at = next + 1) {
      next = r.out.find('\n', at);
      if (next == std::string::npos) next = r.out.size();
      CHECK_MESSAGE(next - at <= 100, r.out.substr(at, next - at));
    }
    CHECK(run_binary("12_attention --inject perturb:1e-3 --quiet").status == 1);
    auto line = run_binary("12_attention --mesh Y=4");
    CHECK(line.status == 2);
    CHECK(count_lines(line.err) == 1);
    CHECK(line.out.empty());
  }

  TEST_CASE("lesson 12 on one device (--mesh X=1,Y=1): nothing moves, and that passes") {
    const auto r = run_binary("12_attention --mesh X=1,Y=1 --json");
    CHECK(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    bool said = false;
    for (const auto& c : j["checks"]) said = said || c["name"] == "megatron: on one device nothing moves";
    CHECK(said);
  }

  TEST_CASE("lesson 12's Next: case file moves the bytes the lesson says it does") {
    const auto lesson = run_binary("12_attention");
    CHECK(lesson.out.find("so its AllReduces move 1536 B per device, not this lesson's 3584.") != std::string::npos);
    const auto r = run_binary("shardlab run harness/cases/attention_megatron.toml --json");
    REQUIRE(r.status == 0);
    CHECK(nlohmann::json::parse(r.out)["bytes_per_device"] == 1536);
  }

  TEST_CASE("lesson 12: the words it uses first are explained where they appear") {
    const auto r = run_binary("12_attention");
    CHECK(r.out.find("Words: all_reduce_max is an AllReduce that keeps each element's largest value") != std::string::npos);
  }

  TEST_CASE("lesson 12 on X=4,Y=2: one short sentence naming meshes that work") {
    const auto r = run_binary("12_attention --mesh X=4,Y=2");
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(shardlab::testing::count_lines(r.err) == 1);
    CHECK(r.err.size() <= 101);
    CHECK(r.err.find("use a mesh like X=2,Y=4") != std::string::npos);
  }
}
