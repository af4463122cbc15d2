// The math of the mixture of experts, apart from its dispatch and combine (moe.cpp): the router
// (logits, top-k softmax gates and its backward) and one expert on one token, forward beside
// backward. Every stored value is rounded to the run's element type t.
#include "harness/models/moe_expert.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/subnormal.hpp"

namespace shardlab {

namespace {

// While a test counts subnormals (core/subnormal.hpp): one contraction's two operands, values of
// type t held as double.
void count_operands(const double* a, std::size_t na, const double* b, std::size_t nb, DType t) {
  if (!counting_subnormals()) return;
  count_operand(a, na, t, true);
  count_operand(b, nb, t, false);
}

}  // namespace

std::vector<double> token_logits(const Tensor& x, const Tensor& w_router, std::size_t token, int experts, DType t) {
  const std::size_t m = x.shape()[1];
  std::vector<double> l(static_cast<std::size_t>(experts));
  count_operands(&x(token, 0), m, w_router.data(), w_router.size(), t);
  for (int e = 0; e < experts; ++e) {
    double acc = 0;
    for (std::size_t j = 0; j < m; ++j) acc += x(token, j) * w_router(j, e);
    l[e] = round_to(t, acc);
  }
  return l;
}

TokenRoute route_token(const double* logits, int experts, int top_k, DType t) {
  std::vector<int> order(static_cast<std::size_t>(experts));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  TokenRoute r;
  r.experts.assign(order.begin(), order.begin() + top_k);
  const double top = logits[r.experts[0]];
  double sum = 0;
  std::vector<double> e(static_cast<std::size_t>(top_k));
  for (int k = 0; k < top_k; ++k) sum += e[k] = std::exp(logits[r.experts[k]] - top);
  for (int k = 0; k < top_k; ++k) r.gates.push_back(round_to(t, e[k] / sum));
  return r;
}

std::vector<double> router_backward(const TokenRoute& r, const std::vector<double>& dgates, int experts, DType t) {
  double s = 0;
  for (std::size_t k = 0; k < r.gates.size(); ++k) s += r.gates[k] * dgates[k];
  std::vector<double> dl(static_cast<std::size_t>(experts), 0.0);
  for (std::size_t k = 0; k < r.gates.size(); ++k) dl[r.experts[k]] = round_to(t, r.gates[k] * (dgates[k] - s));
  return dl;
}

// One expert on one token: h = x W_in[e] (kept for the backward), y = relu(h) W_out[e].
// Sums run in index order; h and y are rounded to t.
void expert_forward(const Tensor& w_in, const Tensor& w_out, std::size_t e, const double* x, double* h, double* y,
                    std::size_t m, std::size_t hid, DType t) {
  count_operands(x, m, &w_in(e, 0, 0), m * hid, t);
  for (std::size_t i = 0; i < hid; ++i) {
    double acc = 0;
    for (std::size_t j = 0; j < m; ++j) acc += x[j] * w_in(e, j, i);
    h[i] = round_to(t, acc);
  }
  count_operands(h, hid, &w_out(e, 0, 0), hid * m, t);
  for (std::size_t j = 0; j < m; ++j) {
    double acc = 0;
    for (std::size_t i = 0; i < hid; ++i) acc += std::max(h[i], 0.0) * w_out(e, i, j);
    y[j] = round_to(t, acc);
  }
}

// Its backward from dy: dx (rounded to t); dW_in[e] and dW_out[e] accumulate this token's terms.
void expert_backward(const Tensor& w_in, const Tensor& w_out, std::size_t e, const double* x, const double* h,
                     const double* dy, double* dx, double* dw_in, double* dw_out, std::size_t m, std::size_t hid,
                     DType t) {
  std::vector<double> dh(hid);
  count_operands(dy, m, &w_out(e, 0, 0), hid * m, t);
  for (std::size_t i = 0; i < hid; ++i) {
    double acc = 0;
    for (std::size_t j = 0; j < m; ++j) acc += dy[j] * w_out(e, i, j);
    dh[i] = h[i] > 0 ? round_to(t, acc) : 0.0;
  }
  count_operands(dh.data(), hid, &w_in(e, 0, 0), m * hid, t);
  count_operands(h, hid, dy, m, t);
  count_operands(x, m, dh.data(), hid, t);
  for (std::size_t j = 0; j < m; ++j) {
    double acc = 0;
    for (std::size_t i = 0; i < hid; ++i) acc += dh[i] * w_in(e, j, i);
    dx[j] = round_to(t, acc);
  }
  for (std::size_t i = 0; i < hid; ++i)
    for (std::size_t j = 0; j < m; ++j) dw_out[i * m + j] += std::max(h[i], 0.0) * dy[j];
  for (std::size_t j = 0; j < m; ++j)
    for (std::size_t i = 0; i < hid; ++i) dw_in[j * hid + i] += x[j] * dh[i];
}

}  // namespace shardlab
