// Lesson 03: the article's dot product (-3) split over X with one AllReduce of one double, the
// article's 2x2 C, and the verdict failing on a corrupted reference.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"

using shardlab::testing::run_binary;

TEST_SUITE("lessons") {
  TEST_CASE("lesson 03 --json: the partial dot products cost one AllReduce of 8 bytes over X") {
    auto r = run_binary("03_dot_product_and_matmul --dtype float64 --json");
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    CHECK(j["max_abs_error"] == 0.0);
    REQUIRE(j["collectives"].size() == 1);
    auto ar = j["collectives"][0];
    CHECK(ar["op"] == "all_reduce");
    CHECK(ar["axes"] == "X");
    CHECK(ar["group_size"] == 2);
    // One double over a ring of 2: 2(n-1)/n * 8 bytes = 8.
    CHECK(ar["bytes_per_device"] == 8);
    CHECK(ar["predicted_bytes_per_device"] == 8);
    CHECK(j["checks"].size() == 5);
  }

  TEST_CASE("lesson 03 text: the article's numbers, partial dot products and the four beats") {
    auto r = run_binary("03_dot_product_and_matmul --dtype float64");
    CHECK(r.status == 0);
    CHECK(r.out.find("[0:2] -> -1") != std::string::npos);  // the article's first partial
    CHECK(r.out.find("[2:4] -> -2") != std::string::npos);  // and its second
    CHECK(r.out.find("C[0, 1] = (1)(-1) + (0)(2) + (2)(0) + (-1)(2) = -3") != std::string::npos);
    CHECK(r.out.find("[  4  -3 ]") != std::string::npos);
    CHECK(r.out.find("512 FLOPs") != std::string::npos);
    CHECK(r.out.find("Takeaway:") != std::string::npos);
    CHECK(r.out.find("Next:") != std::string::npos);
    CHECK(r.out.find("\nPASS 03_dot_product_and_matmul") != std::string::npos);
  }

  TEST_CASE("lesson 03 on X=4: one element per device, partials 1, 0, 0, -2") {
    auto r = run_binary("03_dot_product_and_matmul --dtype float64 --mesh X=4,Y=2");
    CHECK(r.status == 0);
    CHECK(r.out.find("[3:4] -> -2") != std::string::npos);
  }

  TEST_CASE("lesson 03 fails when its expected results are wrong, and bad input exits 2") {
    auto f = run_binary("03_dot_product_and_matmul --dtype float64 --quiet --inject perturb:1e-9");
    CHECK(f.status == 1);
    CHECK(f.out.rfind("FAIL", 0) == 0);
    auto d = run_binary("03_dot_product_and_matmul --dtype float64 --mesh X=3,Y=3");
    CHECK(d.status == 2);
    CHECK(shardlab::testing::count_lines(d.err) == 1);
    CHECK(d.err.find("not divisible by mesh axis X (size 3)") != std::string::npos);
    auto s = run_binary("03_dot_product_and_matmul --dtype float64 --shape 4,16");
    CHECK(s.status == 2);
    CHECK(s.err.find("expected m,k,n") != std::string::npos);
  }

  TEST_CASE("lesson 03 --vocab: 50257 rows over 8 devices both ways, verified, padding's bytes by formula") {
    auto r = run_binary("03_dot_product_and_matmul --vocab");
    CHECK(r.status == 0);
    CHECK(r.out.find("chunk W dim V: 50257 rows over X in 8 blocks: 6283 rows x 7, 6276 x 1") != std::string::npos);
    // 8 x 7 x 6283 padded rows against 7 x 50257 rows, 4 x 4 B each: 49 rows x 16 B = 784 B more.
    CHECK(r.out.find("784 B more over all") != std::string::npos);
    CHECK(r.out.find("PASS") != std::string::npos);
  }
}
