// Lesson 16: the naive split, GPipe and 1F1B on 4 devices: gradients equal the whole batch's, the
// bubble equals (P-1)/(m+P-1), the timeline is the article's figure, and the batch arithmetic.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"

using shardlab::testing::run_binary;

TEST_SUITE("lessons") {
  TEST_CASE("lesson 16 (pipeline): PASS, the article's GPipe figure, 8 x 32 x 4 = 1024") {
    auto r = run_binary("16_pipeline");
    REQUIRE(r.status == 0);
    CHECK(r.out.find("device 0 |F0,0 F0,1 F0,2 F0,3   .    .    .    .    .    .  B0,3 B0,2 B0,1 B0,0") != std::string::npos);
    CHECK(r.out.find("8 x 32 x 4 = 1024") != std::string::npos);
    CHECK(r.out.find("PASS 16_pipeline") != std::string::npos);
    for (const auto& line : {"naive: bubble", "gpipe: bubble", "1f1b: bubble"}) CHECK(r.out.find(line) != std::string::npos);
    const auto j = nlohmann::json::parse(run_binary("16_pipeline --json").out);
    CHECK(j["pass"] == true);
    CHECK(j["global_batch"] == 1024);
    CHECK(run_binary("16_pipeline --inject perturb:1e-3 --quiet").status == 1);
    CHECK(run_binary("16_pipeline --mesh X=2").status == 2);
  }
}
