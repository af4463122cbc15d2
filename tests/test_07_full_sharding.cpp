// Lesson 07: A and B split over both axes; each device computes a unique 2x1 block of C, C comes
// out X,Y, and no work is repeated.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"

using shardlab::testing::run_binary;

TEST_SUITE("lessons") {
  TEST_CASE("lesson 07 --json: AllGather A over Y on [2,4] blocks, B over X on [8,1] blocks") {
    auto r = run_binary("07_full_sharding --dtype float64 --json");
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    REQUIRE(j["collectives"].size() == 2);
    CHECK(j["collectives"][0]["bytes_per_device"].get<double>() == 3 * (2 * 4) * 8);
    CHECK(j["collectives"][1]["bytes_per_device"].get<double>() == 1 * (8 * 1) * 8);
    CHECK(j["bytes_per_device"].get<double>() == 256);
  }

  TEST_CASE("lesson 07 text: unique 2x1 blocks, 1x the work, C split like A and B") {
    auto r = run_binary("07_full_sharding --dtype float64");
    CHECK(r.status == 0);
    CHECK(r.out.find("{0} {1} {2} {3} {4} {5} {6} {7}") != std::string::npos);
    CHECK(r.out.find("64 on every device; unsharded 512 / 8 devices = 64: 1x") != std::string::npos);
    CHECK(r.out.find("C[I_X, J_Y]") != std::string::npos);
    CHECK(r.out.find("[2:4, 3:4]") != std::string::npos);  // device 7's block of C
    CHECK(r.out.find("448 bytes sent and 256 FLOPs per device") != std::string::npos);  // Case 2
    CHECK(r.out.find("\nPASS 07_full_sharding") != std::string::npos);
  }

  TEST_CASE("lesson 07 fails when its expected result is wrong, and bad input exits 2") {
    CHECK(run_binary("07_full_sharding --dtype float64 --quiet --inject perturb:1e-9").status == 1);
    auto d = run_binary("07_full_sharding --dtype float64 --mesh X=3,Y=3");
    CHECK(d.status == 2);
    CHECK(shardlab::testing::count_lines(d.err) == 1);
    auto s = run_binary("07_full_sharding --dtype float64 --shape 4,16,6");
    CHECK(s.status == 2);
    CHECK(s.err.find("dim 1 of B (size 6) is not divisible by mesh axis Y (size 4)") != std::string::npos);
  }

  TEST_CASE("lesson 07's Next: uses lesson 08's sizes (H = 64)") {
    const auto r = run_binary("07_full_sharding");
    CHECK(r.out.find("--out-spec X,_,Y --dims b=8,s=4,m=16,h=64") != std::string::npos);
    CHECK(r.out.find("h=32") == std::string::npos);
  }
}
