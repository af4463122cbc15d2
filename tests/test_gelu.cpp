// GELU against tabulated values of x*Phi(x) and its derivative against central differences.
#include <doctest/doctest.h>

#include "core/gelu.hpp"

using namespace shardlab;

TEST_CASE("gelu matches x * Phi(x) at tabulated points") {
  // Phi(1) = 0.8413447460685429, Phi(-1) = 0.15865525393145707, Phi(2) = 0.9772498680518208
  Tensor x = {0.0, 1.0, -1.0, 2.0};
  Tensor y = gelu(x);
  CHECK(y(0) == 0.0);
  CHECK(y(1) == doctest::Approx(0.8413447460685429).epsilon(1e-15));
  CHECK(y(2) == doctest::Approx(-0.15865525393145707).epsilon(1e-15));
  CHECK(y(3) == doctest::Approx(2 * 0.9772498680518208).epsilon(1e-15));
}

TEST_CASE("gelu_grad matches central differences") {
  Tensor x = {-3.0, -1.5, -0.2, 0.0, 0.7, 2.5};
  const double h = 1e-5;
  Tensor g = gelu_grad(x);
  for (std::size_t i = 0; i < x.size(); ++i) {
    Tensor p = {x(i) + h}, m = {x(i) - h};
    const double fd = (gelu(p)(0) - gelu(m)(0)) / (2 * h);
    CAPTURE(x(i));
    CHECK(g(i) == doctest::Approx(fd).epsilon(1e-8));
  }
  CHECK(gelu_grad(Tensor{0.0})(0) == 0.5);  // Phi(0) + 0
}
