// Lesson 02: the AllReduce and ReduceScatter over mesh_cols move the bytes the ring formulas say,
// the sums match the unsharded ones, and a corrupted reference is caught.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"

using shardlab::testing::run_binary;

namespace {
// Each device holds 16 partial sums of 8-byte doubles; the group over mesh_cols has n = 4.
constexpr double kLocalBytes = 16 * 8;
constexpr double kN = 4;
}  // namespace

TEST_SUITE("lessons") {
  TEST_CASE("lesson 02 --json: all_reduce moves 2(n-1)/n of the partial sums, reduce_scatter (n-1)/n") {
    auto r = run_binary("02_reduction_allreduce --dtype float64 --json");
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    REQUIRE(j["collectives"].size() == 2);
    auto ar = j["collectives"][0], rs = j["collectives"][1];
    CHECK(ar["op"] == "all_reduce");
    CHECK(ar["axes"] == "mesh_cols");
    CHECK(ar["bytes_per_device"].get<double>() == 2 * (kN - 1) / kN * kLocalBytes);
    CHECK(ar["bytes_per_device"] == ar["predicted_bytes_per_device"]);
    CHECK(rs["op"] == "reduce_scatter");
    CHECK(rs["bytes_per_device"].get<double>() == (kN - 1) / kN * kLocalBytes);
    CHECK(j["bytes_per_device"].get<double>() == 3 * (kN - 1) / kN * kLocalBytes);
    CHECK(j["max_abs_error"] == 0.0);  // integer inputs: exact sums
  }

  TEST_CASE("lesson 02 text shows partial sums, both collectives and the verdict") {
    auto r = run_binary("02_reduction_allreduce --dtype float64");
    CHECK(r.status == 0);
    CHECK(r.out.find("{U_mesh_cols}") != std::string::npos);
    CHECK(r.out.find("all_reduce") != std::string::npos);
    CHECK(r.out.find("reduce_scatter") != std::string::npos);
    CHECK(r.out.find("Takeaway:") != std::string::npos);
    CHECK(r.out.find("\nPASS 02_reduction_allreduce") != std::string::npos);
  }

  TEST_CASE("lesson 02 fails when its expected result is wrong") {
    auto r = run_binary("02_reduction_allreduce --dtype float64 --quiet --inject perturb:1e-9");
    CHECK(r.status == 1);
    CHECK(r.out.rfind("FAIL", 0) == 0);
  }

  TEST_CASE("lesson 02 bad input: non-divisible mesh and unknown mesh axis exit 2 with one sentence") {
    auto r = run_binary("02_reduction_allreduce --dtype float64 --mesh mesh_rows=3,mesh_cols=3");
    CHECK(r.status == 2);
    CHECK(shardlab::testing::count_lines(r.err) == 1);
    CHECK(r.err.find("not divisible") != std::string::npos);
    auto u = run_binary("02_reduction_allreduce --dtype float64 --mapping input_rows:rows");
    CHECK(u.status == 2);
    CHECK(u.err.find("no such axis") != std::string::npos);
    auto m = run_binary("02_reduction_allreduce --dtype float64 --mesh X=2,,Y=4");
    CHECK(m.status == 2);
    CHECK(shardlab::testing::count_lines(m.err) == 1);
  }

  TEST_CASE("lesson 02 on a 4x2 mesh: groups of 2 move 2(n-1)/n of 8 sums") {
    auto r = run_binary("02_reduction_allreduce --dtype float64 --json --mesh mesh_rows=4,mesh_cols=2");
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["collectives"][0]["bytes_per_device"].get<double>() == 2 * (2 - 1) / 2.0 * 8 * 8);
  }
}
