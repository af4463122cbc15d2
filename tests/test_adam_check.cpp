// harness/models/adam_check.cpp: Adam written plainly. Its first step is lr against the
// gradient's sign (m^ = g, v^ = g^2: a formula, not a run); the shared Adam::step agrees with it
// over several steps, and a step without the bias correction, written here, fails the check.
#include <doctest/doctest.h>

#include <cmath>

#include "harness/models/adam_check.hpp"
#include "harness/models/training.hpp"

using namespace shardlab;

TEST_SUITE("adam check") {
  TEST_CASE("plain_adam's first step moves each weight by lr g / (|g| + eps)") {
    const AdamParams p;
    std::vector<double> w = {1.0, -2.0, 0.5}, m(3), v(3);
    const Tensor g = Tensor({0.25, -3.0, 0.0});
    plain_adam(w, m, v, g, 1, p);
    CHECK(w[0] == doctest::Approx(1.0 - p.lr * 0.25 / (0.25 + p.eps)).epsilon(1e-14));
    CHECK(w[1] == doctest::Approx(-2.0 + p.lr * 3.0 / (3.0 + p.eps)).epsilon(1e-14));
    CHECK(w[2] == 0.5);  // a zero gradient leaves the weight
  }
  TEST_CASE("Adam::step agrees with the plain Adam over 3 steps; no bias correction fails it") {
    const AdamParams p;
    Tensor w = Tensor({0.5, -0.25, 1.0, 2.0}), no_bias = w;
    std::vector<double> plain(w.begin(), w.end()), m(4), v(4), nm(4), nv(4);
    Adam state(shape_of(w));
    for (int t = 1; t <= 3; ++t) {
      const Tensor g = Tensor({0.1 * t, -0.2, 0.3 / t, 0.05});
      state.step(w, g, t, p);
      plain_adam(plain, m, v, g, t, p);
      for (std::size_t i = 0; i < 4; ++i) {  // the planted bug: m and v used without 1 / (1 - beta^t)
        nm[i] = p.beta1 * nm[i] + (1 - p.beta1) * g(i);
        nv[i] = p.beta2 * nv[i] + (1 - p.beta2) * g(i) * g(i);
        no_bias(i) -= p.lr * nm[i] / (std::sqrt(nv[i]) + p.eps);
      }
    }
    const Verdict good = adam_against_plain("W", plain, w, 3);
    CHECK(good.pass);
    CHECK(good.name == "Adam's step on 4 elements of W against Adam written plainly");
    CHECK(good.power < 1e-9);
    CHECK_FALSE(adam_against_plain("W", plain, no_bias, 3).pass);
  }
}
