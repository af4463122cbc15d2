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

TEST_CASE("chunk_counts cuts as torch.chunk: blocks of ceil(rows/parts), the last shorter or empty") {
  // torch.chunk(torch.arange(n), parts) lengths, by hand.
  CHECK(chunk_counts(16, 3) == std::vector<std::size_t>{6, 6, 4});
  CHECK(chunk_counts(16, 5) == std::vector<std::size_t>{4, 4, 4, 4, 0});
  CHECK(chunk_counts(8, 3) == std::vector<std::size_t>{3, 3, 2});
  CHECK(chunk_counts(8, 2) == std::vector<std::size_t>{4, 4});
  CHECK(chunk_counts(2, 4) == std::vector<std::size_t>{1, 1, 0, 0});
}

TEST_CASE("row_block, col_block, pad_rows and pad_cols take and pad the chunk blocks") {
  const Tensor t = Tensor{{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12, 13, 14}};
  CHECK(col_block(t, 0, 2) == Tensor{{0, 1, 2}, {5, 6, 7}, {10, 11, 12}});
  CHECK(col_block(t, 1, 2) == Tensor{{3, 4}, {8, 9}, {13, 14}});
  CHECK(row_block(t, 1, 2) == Tensor{{10, 11, 12, 13, 14}});
  CHECK(row_block(t, 2, 4).shape()[0] == 1);  // 3 rows over 4: 1, 1, 1, 0
  CHECK(row_block(t, 3, 4).shape()[0] == 0);
  CHECK(pad_cols(col_block(t, 1, 2), 3) == Tensor{{3, 4, 0}, {8, 9, 0}, {13, 14, 0}});
  CHECK(pad_rows(row_block(t, 1, 2), 2) == Tensor{{10, 11, 12, 13, 14}, {0, 0, 0, 0, 0}});
  CHECK(pad_rows(t, 3) == t);
}

TEST_CASE("RowSlicing: own rows and stored size, chunk and pad, and the ring's bytes for the parts") {
  const Tensor t = Tensor{{1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}, {6, 6}, {7, 7}, {8, 8}};  // 8 rows over 3
  const RowSlicing chunk(8, 3, 2, Uneven::chunk), pad(8, 3, 2, Uneven::pad);
  CHECK(chunk.counts == std::vector<std::size_t>{3, 3, 2});
  CHECK(chunk.at == std::vector<std::size_t>{0, 3, 6});
  CHECK(chunk.stored == 2);
  CHECK(pad.stored == 3);
  CHECK(chunk.own(t) == Tensor{{7, 7}, {8, 8}});
  CHECK(pad.own(t) == Tensor{{7, 7}, {8, 8}, {0, 0}});
  // Rows of 10 B. chunk, member 2: ReduceScatter sends every part but its own, 80 - 20; AllGather
  // every part but its successor's (member 0's), 80 - 30. pad: parts of 30 each, 60 and 60.
  CHECK(chunk.scatter_bytes(10) == 60);
  CHECK(chunk.gather_bytes(10) == 50);
  CHECK(pad.scatter_bytes(10) == 60);
  CHECK(pad.gather_bytes(10) == 60);
  const RowSlicing even(6, 3, 1, Uneven::none);
  CHECK(even.even);
  CHECK(even.own(Tensor{{1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}, {6, 6}}) == Tensor{{3, 3}, {4, 4}});
  CHECK_THROWS(RowSlicing(8, 3, 0, Uneven::none));
}
