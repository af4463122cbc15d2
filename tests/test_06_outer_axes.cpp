// Lesson 06 (Case 2): the gathers of Case 1B on A blocks split over X too; each half of the mesh
// computes half of C.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"

using shardlab::testing::run_binary;

TEST_SUITE("lessons") {
  TEST_CASE("lesson 06 --json: AllGather A over Y on [2,4] blocks, B over X on [8,4] blocks") {
    auto r = run_binary("06_outer_axes --dtype float64 --json");
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    REQUIRE(j["collectives"].size() == 2);
    CHECK(j["collectives"][0]["tensor"] == "A");
    CHECK(j["collectives"][0]["axes"] == "Y");
    CHECK(j["collectives"][0]["bytes_per_device"].get<double>() == 3 * (2 * 4) * 8);
    CHECK(j["collectives"][1]["tensor"] == "B");
    CHECK(j["collectives"][1]["axes"] == "X");
    CHECK(j["collectives"][1]["bytes_per_device"].get<double>() == 1 * (8 * 4) * 8);
  }

  TEST_CASE("lesson 06 text: each half of the mesh computes half of C; Y still repeats") {
    auto r = run_binary("06_outer_axes --dtype float64");
    CHECK(r.status == 0);
    CHECK(r.out.find("{0,1,2,3} {4,5,6,7}") != std::string::npos);
    CHECK(r.out.find("256 on every device; unsharded 512 / 8 devices = 64: 4x") != std::string::npos);
    CHECK(r.out.find("640 bytes sent and 512 FLOPs per device") != std::string::npos);  // Case 1B
    CHECK(r.out.find("448 bytes sent and 256 FLOPs per device") != std::string::npos);
    CHECK(r.out.find("data parallelism") != std::string::npos);
    CHECK(r.out.find("\nPASS 06_outer_axes") != std::string::npos);
  }

  TEST_CASE("lesson 06 fails when its expected result is wrong, and bad input exits 2") {
    CHECK(run_binary("06_outer_axes --dtype float64 --quiet --inject perturb:1e-9").status == 1);
    auto d = run_binary("06_outer_axes --dtype float64 --mesh X=3,Y=3");
    CHECK(d.status == 2);
    CHECK(shardlab::testing::count_lines(d.err) == 1);
    CHECK(d.err.find("dim 0 of A (size 4) is not divisible by mesh axis X (size 3)") != std::string::npos);
  }
}
