// harness/models/training: Adam, which lessons 15-17 and their unsharded references share (so no
// lesson can catch a wrong Adam). Checked here on its own, over several steps, against numbers that
// do not come from Adam::step: a constant gradient worked by hand, and a second, plainly written
// scalar Adam (Kingma and Ba, Algorithm 1) on random gradients.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "core/tensor.hpp"
#include "harness/models/training.hpp"

using namespace shardlab;

namespace {

// Algorithm 1 of the Adam paper for one scalar, written apart from Adam::step.
struct ScalarAdam {
  double m = 0, v = 0;
  double step(double w, double g, int t, const AdamParams& p) {
    m = p.beta1 * m + (1 - p.beta1) * g;
    v = p.beta2 * v + (1 - p.beta2) * g * g;
    const double m_hat = m / (1 - std::pow(p.beta1, t));
    const double v_hat = v / (1 - std::pow(p.beta2, t));
    return w - p.lr * m_hat / (std::sqrt(v_hat) + p.eps);
  }
};

}  // namespace

TEST_CASE("Adam with a constant gradient g moves each weight by lr/(1 + eps/|g|) against g's sign, every step") {
  // By hand: with g constant, m_t = (1 - beta1^t) g and v_t = (1 - beta2^t) g^2, so the corrected
  // m^ = g and v^ = g^2 at every t, and each step is lr g / (|g| + eps). A missing bias correction
  // changes every step; a first moment that decays by beta2 but is corrected by beta1 changes steps
  // 2 and later (step 1 alone cannot tell; the next test covers decay and correction both by beta2).
  const AdamParams p;  // lr 0.01, beta1 0.9, beta2 0.999, eps 1e-8
  Tensor w = Tensor{{1.0, -2.0, 0.5}};
  const Tensor g = Tensor{{0.5, -0.25, 4.0}};
  Adam adam(shape_of(w));
  const Tensor w0 = w;
  for (int t = 1; t <= 10; ++t) {
    adam.step(w, g, t, p);
    for (std::size_t i = 0; i < 3; ++i) {
      const double want = w0(0, i) - t * p.lr * g(0, i) / (std::fabs(g(0, i)) + p.eps);
      CAPTURE(t);
      CAPTURE(i);
      CHECK(std::fabs(w(0, i) - want) <= 1e-12);
    }
  }
}

TEST_CASE("Adam over 20 steps of random gradients equals a plainly written scalar Adam") {
  // Both in float64 from the same gradients: they may differ only by the rounding of a handful
  // of operations per step, far below 1e-12 of the weights (which move by about lr = 1e-2 a step).
  for (const AdamParams p : {AdamParams{}, AdamParams{0.05, 0.8, 0.99, 1e-6}}) {
    const Shape shape{4, 5};
    Tensor w = random_integers(shape, 7, -5, 5);
    std::vector<double> ws(w.begin(), w.end());
    std::vector<ScalarAdam> ref(ws.size());
    Adam adam(shape);
    double worst = 0;
    for (int t = 1; t <= 20; ++t) {
      const Tensor g = random_integers(shape, 100 + t, -9, 9) / 8.0;  // zeros included
      adam.step(w, g, t, p);
      for (std::size_t i = 0; i < ws.size(); ++i) ws[i] = ref[i].step(ws[i], g.flat(i), t, p);
      for (std::size_t i = 0; i < ws.size(); ++i) worst = std::max(worst, std::fabs(w.flat(i) - ws[i]));
    }
    CAPTURE(p.lr);
    CHECK(worst <= 1e-12);
    // and the weights did move: 20 steps of about lr each, so the check above is not of a no-op
    double moved = 0;
    const Tensor w0 = random_integers(shape, 7, -5, 5);
    for (std::size_t i = 0; i < ws.size(); ++i) moved = std::max(moved, std::fabs(w.flat(i) - w0.flat(i)));
    CHECK(moved > 5 * p.lr);
  }
}

TEST_CASE("Adam's moments are the paper's after three steps (values worked by hand)") {
  // g = 1, then 2, then -1, lr 0.1, beta1 0.5, beta2 0.75, eps 0:
  //   m: 0.5, 0.5*0.5 + 0.5*2 = 1.25, 0.625 - 0.5 = 0.125
  //   v: 0.25, 0.1875 + 0.25*4 = 1.1875, 0.890625 + 0.25 = 1.140625
  const AdamParams p{0.1, 0.5, 0.75, 0.0};
  Tensor w = xt::zeros<double>(Shape{1, 1});
  Adam adam(shape_of(w));
  const double gs[] = {1, 2, -1}, ms[] = {0.5, 1.25, 0.125}, vs[] = {0.25, 1.1875, 1.140625};
  double want_w = 0;
  for (int t = 1; t <= 3; ++t) {
    Tensor g = xt::zeros<double>(Shape{1, 1});
    g(0, 0) = gs[t - 1];
    adam.step(w, g, t, p);
    CHECK(adam.m(0, 0) == doctest::Approx(ms[t - 1]).epsilon(1e-15));
    CHECK(adam.v(0, 0) == doctest::Approx(vs[t - 1]).epsilon(1e-15));
    want_w -= p.lr * (ms[t - 1] / (1 - std::pow(0.5, t))) / std::sqrt(vs[t - 1] / (1 - std::pow(0.75, t)));
    CHECK(w(0, 0) == doctest::Approx(want_w).epsilon(1e-14));
  }
}
