// Causal attention on one block, forward and backward (harness/models/attention_block.hpp).
#include "harness/models/attention_block.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace shardlab {

OnlineSoftmax::OnlineSoftmax(std::size_t rows, std::size_t d)
    : m(rows, -std::numeric_limits<double>::infinity()), l(rows, 0.0), acc(xt::zeros<double>(Shape{rows, d})) {}

void attention_block_forward(const Tensor& q, const Tensor& k, const Tensor& v, std::size_t a, std::size_t b,
                             std::size_t c, bool diagonal, OnlineSoftmax& run, BlockScratch& scratch) {
  const std::size_t d = q.shape()[1];
  const double scale = 1.0 / std::sqrt(double(d)), inf = std::numeric_limits<double>::infinity();
  std::vector<double>&s = scratch.s, &p = scratch.p;
  for (std::size_t r = 0; r < c; ++r) {
    const std::size_t qr = a * c + r;
    double top = run.m[qr];
    for (std::size_t j = 0; j < c; ++j) {
      double x = -inf;
      if (!diagonal || j <= r) {
        x = 0;
        for (std::size_t e = 0; e < d; ++e) x += q(qr, e) * k(b * c + j, e);
        x *= scale;
      }
      s[r * c + j] = x;
      top = std::max(top, x);
    }
    const double rescale = std::exp(run.m[qr] - top);
    double sum = 0;
    for (std::size_t j = 0; j < c; ++j) sum += p[r * c + j] = std::exp(s[r * c + j] - top);
    run.l[qr] = run.l[qr] * rescale + sum;
    run.m[qr] = top;
    for (std::size_t e = 0; e < d; ++e) {
      double pv = 0;
      for (std::size_t j = 0; j < c; ++j) pv += p[r * c + j] * v(b * c + j, e);
      run.acc(qr, e) = run.acc(qr, e) * rescale + pv;
    }
  }
}

AttentionForward attention_finish(const OnlineSoftmax& run, const Tensor& dout) {
  const std::size_t rows = run.acc.shape()[0], d = run.acc.shape()[1];
  AttentionForward f{xt::empty<double>(Shape{rows, d}), std::vector<double>(rows), std::vector<double>(rows, 0.0)};
  for (std::size_t r = 0; r < rows; ++r) {
    f.lse[r] = run.m[r] + std::log(run.l[r]);
    for (std::size_t e = 0; e < d; ++e) {
      f.o(r, e) = run.acc(r, e) / run.l[r];
      f.D[r] += dout(r, e) * f.o(r, e);
    }
  }
  return f;
}

void attention_block_backward(const Tensor& q, const Tensor& dout, const Tensor& k, const Tensor& v,
                              const AttentionForward& fwd, std::size_t a, std::size_t b, std::size_t c, bool diagonal,
                              Tensor& dq, Tensor& dk, Tensor& dv, BlockScratch& scratch) {
  const std::size_t d = q.shape()[1];
  const double scale = 1.0 / std::sqrt(double(d));
  std::vector<double>&p = scratch.p, &ds = scratch.s;  // dS reuses the scores' buffer
  for (std::size_t r = 0; r < c; ++r) {
    const std::size_t qr = a * c + r;
    for (std::size_t j = 0; j < c; ++j) {
      double pr = 0, dp = 0;
      if (!diagonal || j <= r) {
        double x = 0;
        for (std::size_t e = 0; e < d; ++e) x += q(qr, e) * k(b * c + j, e);
        pr = std::exp(x * scale - fwd.lse[qr]);
        for (std::size_t e = 0; e < d; ++e) dp += dout(qr, e) * v(b * c + j, e);
      }
      p[r * c + j] = pr;
      ds[r * c + j] = pr * (dp - fwd.D[qr]);
    }
  }
  for (std::size_t r = 0; r < c; ++r)
    for (std::size_t j = 0; j < c; ++j) {
      const double pr = p[r * c + j], g = ds[r * c + j] * scale;
      for (std::size_t e = 0; e < d; ++e) {
        dv(b * c + j, e) += pr * dout(a * c + r, e);
        dq(a * c + r, e) += g * k(b * c + j, e);
        dk(b * c + j, e) += g * q(a * c + r, e);
      }
    }
}

}  // namespace shardlab
