// Lesson 04 (Case 1A): one AllReduce of C over Y with 2(n-1)/n of C's bytes per device, the
// duplicated work along X, and the verdict failing on a corrupted reference.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"

using shardlab::testing::run_binary;

TEST_SUITE("lessons") {
  TEST_CASE("lesson 04 --json: AllReduce C over Y, 2(n-1)/n of the 4x4 C per device") {
    auto r = run_binary("04_inner_axes_match --dtype float64 --json");
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    REQUIRE(j["collectives"].size() == 1);
    auto ar = j["collectives"][0];
    CHECK(ar["op"] == "all_reduce");
    CHECK(ar["axes"] == "Y");
    CHECK(ar["tensor"] == "C");
    CHECK(ar["bytes_per_device"].get<double>() == 2.0 * 3 / 4 * 16 * 8);
    CHECK(ar["bytes_per_device"] == ar["predicted_bytes_per_device"]);
    CHECK(j["bytes_per_device"].get<double>() == 192);
    // partial sums, C, planner agrees; then the searched plan's C and its bytes
    REQUIRE(j["checks"].size() == 5);
    CHECK(j["checks"][3]["name"] == "C by the searched plan");
    CHECK(j["checks"][3]["pass"] == true);
    CHECK(j["checks"][4]["pass"] == true);
  }

  TEST_CASE("lesson 04 text: partial sums, duplicated work along X, the planner's plan") {
    auto r = run_binary("04_inner_axes_match --dtype float64");
    CHECK(r.status == 0);
    CHECK(r.out.find("C[I, J]{U_Y}") != std::string::npos);
    // Article 001's own words: its spec form, {U_Y} explained where it first appears, its device.
    CHECK(r.out.find("In article 001's form: A: (full, sharded_Y), B: (sharded_Y, full)") != std::string::npos);
    CHECK(r.out.find("({U_Y}: unreduced over Y") != std::string::npos);
    CHECK(r.out.find("device at X=0, Y=1 (d1 here): it holds A[0:4, 4:8] and B[4:8, 0:4]") != std::string::npos);
    CHECK(r.out.find("C2 = A2 B2") != std::string::npos);
    CHECK(r.out.find("{0,4} {1,5} {2,6} {3,7}") != std::string::npos);
    CHECK(r.out.find("128 on every device; unsharded 512 / 8 devices = 64: 2x") != std::string::npos);
    CHECK(r.out.find("contract ik,kj->ij; all_reduce C over Y") != std::string::npos);
    // The search slices A's rows over the idle X first: AllReduce of a [2, 4] C over Y,
    // 2*3/4*64 = 96 bytes, then AllGather over X, 1*64 = 64: 160 against the article's 192.
    CHECK(r.out.find("Cheaper: the search sends 160 bytes per device instead of 192 (1.20x less)") != std::string::npos);
    CHECK(r.out.find("Takeaway:") != std::string::npos);
    CHECK(r.out.find("\nPASS 04_inner_axes_match") != std::string::npos);
  }

  TEST_CASE("lesson 04 on other meshes and shapes: bytes follow 2(n-1)/n of m*n doubles") {
    auto r = run_binary("04_inner_axes_match --dtype float64 --json --mesh rows=4,cols=2 --shape 8,32,8");
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["collectives"][0]["axes"] == "cols");
    CHECK(j["collectives"][0]["bytes_per_device"].get<double>() == 2.0 * 1 / 2 * 64 * 8);
  }

  TEST_CASE("lesson 04 fails when its expected result is wrong, and bad input exits 2") {
    auto f = run_binary("04_inner_axes_match --dtype float64 --quiet --inject perturb:1e-9");
    CHECK(f.status == 1);
    CHECK(f.out.rfind("FAIL", 0) == 0);
    auto d = run_binary("04_inner_axes_match --dtype float64 --mesh X=3,Y=3");
    CHECK(d.status == 2);
    CHECK(shardlab::testing::count_lines(d.err) == 1);
    CHECK(d.err.find("dim 1 of A (size 16) is not divisible by mesh axis Y (size 3)") != std::string::npos);
    auto m = run_binary("04_inner_axes_match --dtype float64 --mesh X=8");
    CHECK(m.status == 2);
    CHECK(m.err.find("two axes") != std::string::npos);
  }

  TEST_CASE("lesson 04: the words its search plan prints first are explained there") {
    const auto r = run_binary("04_inner_axes_match");
    CHECK(r.out.find("(local_slice: a device keeps a slice") != std::string::npos);
  }
}
