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

TEST_CASE("ops: each *_grad kernel is its op's derivative (central differences), and its move bound holds") {
  const Tensor x = Tensor({-1.7, -0.3, 0.2, 0.9, 2.5});
  const double h = 1e-6;
  for (const char* f : {"relu", "gelu", "tanh", "square", "rsqrt"}) {
    CAPTURE(f);
    const Tensor at = std::string(f) == "rsqrt" ? Tensor(xt::abs(x) + 0.5) : x;
    const Tensor slope = unary_op(std::string(f) + "_grad", at);
    const Tensor numeric = (unary_op(f, at + h) - unary_op(f, at - h)) / (2 * h);
    for (std::size_t i = 0; i < at.size(); ++i) CHECK(slope(i) == doctest::Approx(numeric(i)).epsilon(1e-6));
    // Moving x by e moves f_grad by at most the bound: sampled across the interval.
    Tensor e = xt::zeros<double>(at.shape());
    e.fill(0.1);
    const Tensor bound = unary_move_bound(std::string(f) + "_grad", at, e);
    for (double t = -1; t <= 1; t += 0.125) {
      const Tensor moved = xt::abs(unary_op(std::string(f) + "_grad", at + t * e) - slope);
      for (std::size_t i = 0; i < at.size(); ++i) CHECK(moved(i) <= bound(i) + 1e-12);
    }
  }
  // relu_grad is a step: its bound is 1 exactly where the interval reaches across 0, else 0.
  const Tensor b = unary_move_bound("relu_grad", Tensor({-0.05, 0.05, 0.5}), Tensor({0.1, 0.1, 0.1}));
  CHECK(b(0) == 1);
  CHECK(b(1) == 1);
  CHECK(b(2) == 0);
  CHECK(unary_op("copy", x)(4) == 2.5);
}

namespace {

// Same shape and elements (compared one by one: xtensor's == on shapes trips GCC 12's -Wnonnull).
bool same(const Tensor& a, const Tensor& b) {
  if (a.dimension() != b.dimension() || a.size() != b.size()) return false;
  for (std::size_t d = 0; d < a.dimension(); ++d)
    if (a.shape()[d] != b.shape()[d]) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a.data()[i] != b.data()[i]) return false;
  return true;
}

}  // namespace

TEST_CASE("ops: is_max marks each row's largest; its bound is 0 where the order is certain") {
  // Rows over k: [1, 3, 2] (3 alone on top), [5, 5, 0] (a tie).
  const Tensor x = Tensor({{1.0, 3.0, 2.0}, {5.0, 5.0, 0.0}});
  const Tensor m = reduce_op("max", x, "bk", "k");
  const Tensor mask = binary_op("is_max", x, "bk", m, "b", "bk");
  CHECK(same(mask, Tensor({{0.0, 1.0, 0.0}, {1.0, 1.0, 0.0}})));
  // Errors 0.4: row 0's order is certain (3 - 0.4 > 2 + 0.4); row 1's tie is not, 0 stays below.
  Tensor e = xt::zeros<double>({2, 3});
  e.fill(0.4);
  CHECK(same(is_max_bound(x, e, "bk", "k"), Tensor({{0.0, 0.0, 0.0}, {1.0, 1.0, 0.0}})));
  // Errors 0.6: 2 and 3 may swap in row 0.
  Tensor wide = e;
  wide.fill(0.6);
  CHECK(same(is_max_bound(x, wide, "bk", "k"), Tensor({{0.0, 1.0, 1.0}, {1.0, 1.0, 0.0}})));
  // No error at all: both runs compute the same tie.
  CHECK(same(is_max_bound(x, xt::zeros<double>({2, 3}), "bk", "k"), xt::zeros<double>({2, 3})));
}
