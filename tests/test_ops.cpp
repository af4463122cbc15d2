// core/ops.cpp: the local kernels against values worked out by hand.
#include <doctest/doctest.h>

#include <cmath>

#include "core/error.hpp"
#include "core/ops.hpp"

using namespace shardlab;

TEST_CASE("ops: reductions keep the other dims in order; mean divides by the count given") {
  const Tensor x = iota({2, 3, 4});  // x[b, s, h] = 12 b + 4 s + h
  const Tensor s = reduce_op("sum", x, "bsh", "s");
  REQUIRE(shape_of(s) == Shape{2, 4});
  CHECK(s(0, 0) == 0 + 4 + 8);
  CHECK(s(1, 3) == (15 + 19 + 23));
  const Tensor m = reduce_op("max", x, "bsh", "bh");
  REQUIRE(shape_of(m) == Shape{3});
  CHECK(m(0) == 15);
  CHECK(m(2) == 23);
  CHECK(reduce_op("mean", x, "bsh", "h")(1, 2) == doctest::Approx((20 + 21 + 22 + 23) / 4.0));
  CHECK(reduce_op("mean", x, "bsh", "h", 8)(1, 2) == doctest::Approx((20 + 21 + 22 + 23) / 8.0));
  CHECK_THROWS_AS(reduce_op("min", x, "bsh", "h"), Error);
}

TEST_CASE("ops: broadcast by dim name, binary ops, softmax and the unary kernels") {
  const Tensor bias = iota({3});          // bias[h]
  const Tensor x = xt::ones<double>({2, 3});  // x[b, h]
  const Tensor y = binary_op("add", bias, "h", x, "bh", "bh");
  CHECK(y(1, 2) == 3);
  CHECK(binary_op("div", x, "bh", bias + 1, "h", "bh")(0, 2) == doctest::Approx(1.0 / 3));
  const Tensor t = broadcast_to(bias, "h", "hb", {3, 2});
  CHECK(t(2, 1) == 2);
  const Tensor p = softmax_op(iota({2, 3}), "bh", 'h');
  const double z = 1 + std::exp(1.0) + std::exp(2.0);
  CHECK(p(0, 0) == doctest::Approx(1 / z));
  CHECK(p(1, 2) == doctest::Approx(std::exp(2.0) / z));  // shifting a row changes nothing
  const Tensor v = Tensor({-2.0, 0.0, 4.0});
  CHECK(unary_op("relu", v)(0) == 0);
  CHECK(unary_op("square", v)(2) == 16);
  CHECK(unary_op("rsqrt", v)(2) == 0.5);
  CHECK(unary_op("neg", v)(2) == -4);
  CHECK(unary_op("tanh", v)(1) == 0);
  CHECK(unary_op("exp", v)(1) == 1);
  CHECK_THROWS_AS(unary_op("sin", v), Error);
  // Slope bounds: exp on [x - e, x + e] is steepest at the top; rsqrt's interval reaching 0 is unbounded.
  const Tensor e = Tensor({0.5, 0.5, 0.5});
  CHECK(unary_slope_bound("exp", v, e)(2) == doctest::Approx(std::exp(4.5)));
  CHECK(std::isinf(unary_slope_bound("rsqrt", v, e)(1)));
  CHECK(unary_slope_bound("gelu", v, e)(0) == doctest::Approx(1.13));
}
