// core/tensor.cpp: shape helpers, deterministic inputs, iota, parse_shape.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>

#include "core/error.hpp"
#include "core/tensor.hpp"

using namespace shardlab;

TEST_CASE("shape_of, element_count and shape_text") {
  Tensor t = xt::zeros<double>(Shape{2, 3, 4});
  CHECK(shape_of(t) == Shape{2, 3, 4});
  CHECK(element_count(Shape{2, 3, 4}) == 24);
  CHECK(element_count(Shape{7}) == 7);
  CHECK(element_count(Shape{}) == 1);  // a scalar holds one element
  CHECK(element_count(Shape{5, 0}) == 0);
  CHECK(shape_text(Shape{16, 64}) == "[16, 64]");
  CHECK(shape_text(Shape{8}) == "[8]");
  CHECK(shape_text(Shape{}) == "[]");
}

TEST_CASE("iota counts up in row-major order from start") {
  Tensor t = iota(Shape{2, 3}, 5.0);
  REQUIRE(shape_of(t) == Shape{2, 3});
  CHECK(t(0, 0) == 5.0);
  CHECK(t(0, 1) == 6.0);
  CHECK(t(0, 2) == 7.0);
  CHECK(t(1, 0) == 8.0);
  CHECK(t(1, 2) == 10.0);
  Tensor z = iota(Shape{4});
  for (std::size_t i = 0; i < 4; ++i) CHECK(z(i) == static_cast<double>(i));
}

TEST_CASE("random_integers: the documented mt19937_64 mapping, in range, integer valued") {
  // The header promises platform independence: value k = lo + (k-th draw of mt19937_64(seed)) % span.
  const Shape shape{3, 5};
  const int lo = -4, hi = 6;
  Tensor t = random_integers(shape, 1234, lo, hi);
  REQUIRE(shape_of(t) == shape);
  std::mt19937_64 rng(1234);
  const std::uint64_t span = static_cast<std::uint64_t>(hi - lo + 1);
  for (std::size_t k = 0; k < t.size(); ++k) {
    const double want = static_cast<double>(lo + static_cast<int>(rng() % span));
    CHECK(t.data()[k] == want);
    CHECK(t.data()[k] >= lo);
    CHECK(t.data()[k] <= hi);
    CHECK(t.data()[k] == std::floor(t.data()[k]));
  }
  CHECK(random_integers(shape, 1234, lo, hi) == t);  // same seed, same tensor
  CHECK(random_integers(shape, 1235, lo, hi) != t);  // another seed, another tensor
  // a one-value range gives that value everywhere
  Tensor c = random_integers(Shape{4}, 9, 3, 3);
  for (double v : c) CHECK(v == 3.0);
}

TEST_CASE("random_uniform: 53-bit mapping into [lo, hi)") {
  Tensor t = random_uniform(Shape{64}, 77, -1.0, 3.0);
  std::mt19937_64 rng(77);
  for (std::size_t k = 0; k < t.size(); ++k) {
    const double want = -1.0 + 4.0 * (static_cast<double>(rng() >> 11) * 0x1.0p-53);
    CHECK(t.data()[k] == want);
    CHECK(t.data()[k] >= -1.0);
    CHECK(t.data()[k] < 3.0);
  }
  CHECK(random_uniform(Shape{64}, 77, -1.0, 3.0) == t);
  CHECK(random_uniform(Shape{64}, 78, -1.0, 3.0) != t);
}

TEST_CASE("parse_shape reads comma separated positive sizes") {
  CHECK(parse_shape("32,256", "shape of A") == Shape{32, 256});
  CHECK(parse_shape(" 4, 16 ,4 ", "shape of A") == Shape{4, 16, 4});
  CHECK(parse_shape("7", "shape of A") == Shape{7});
}

TEST_CASE("parse_shape errors are parse errors naming what was parsed") {
  for (const std::string bad : {"", "3,,4", "a", "0", "4,-1", "4x4", "2.5"}) {
    CAPTURE(bad);
    try {
      parse_shape(bad, "shape of A");
      FAIL("no error for '" << bad << "'");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::parse);
      CHECK(std::string(e.what()).find("shape of A") != std::string::npos);
    }
  }
}
