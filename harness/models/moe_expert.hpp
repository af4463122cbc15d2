// The math of the mixture of experts (harness/models/moe.hpp), apart from its dispatch and combine:
// the router and one expert on one token, forward beside backward. Values of type t held as double;
// every stored value rounded to t.
#pragma once
#include <cstddef>
#include <vector>

#include "core/dtype.hpp"
#include "core/tensor.hpp"

namespace shardlab {

// Token `token`'s router logits [E]: x[token, :] . W_r[:, e], x [T, m], w_router [m, E].
std::vector<double> token_logits(const Tensor& x, const Tensor& w_router, std::size_t token, int experts, DType t);

// One token's routing: its top_k experts (larger logit first; a tie goes to the lower index) and
// their gates, softmax over the k logits, rounded to t.
struct TokenRoute {
  std::vector<int> experts;
  std::vector<double> gates;
};
TokenRoute route_token(const double* logits, int experts, int top_k, DType t);
// d logits [E] from d gates [k] (the softmax's backward; 0 for experts not chosen), rounded to t:
// dl_e = g_e (dg_e - sum_j g_j dg_j).
std::vector<double> router_backward(const TokenRoute& r, const std::vector<double>& dgates, int experts, DType t);

// One expert on one token: h = x W_in[e] (kept for the backward), y = relu(h) W_out[e], with
// w_in [E, m, hid] and w_out [E, hid, m]. Sums run in index order; h and y are rounded to t.
void expert_forward(const Tensor& w_in, const Tensor& w_out, std::size_t e, const double* x, double* h, double* y,
                    std::size_t m, std::size_t hid, DType t);
// Its backward from dy: dx (rounded to t); dw_in [m, hid] and dw_out [hid, m] (expert e's blocks)
// accumulate this token's terms.
void expert_backward(const Tensor& w_in, const Tensor& w_out, std::size_t e, const double* x, const double* h,
                     const double* dy, double* dx, double* dw_in, double* dw_out, std::size_t m, std::size_t hid,
                     DType t);

}  // namespace shardlab
