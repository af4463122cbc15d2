// The router's gates checked against a second, plainly written softmax-top-k, inside every MoE
// run (lesson 20, `shardlab moe`). The sharded run and the reference share route_token
// (moe_expert.hpp), so a wrong renormalisation or tie rule there would agree with itself and pass
// every other check; this one is written apart and differently: a softmax over all E logits, the
// top k picked one at a time by the largest probability (the lower index on a tie), then
// renormalised over the chosen k.
#pragma once
#include "core/dtype.hpp"
#include "harness/check/verify.hpp"
#include "harness/models/moe.hpp"

namespace shardlab {

// One token's top-k experts and gates, plainly: p = softmax(logits) over all `experts`, then k
// times the largest p not yet taken, then g_k = p_k / (sum of the chosen p). In double, not rounded.
struct PlainRoute {
  std::vector<int> experts;
  std::vector<double> gates;
};
PlainRoute plain_softmax_top_k(const std::vector<double>& logits, int top_k);

// Every token's route_token against plain_softmax_top_k: the same experts in the same order, and
// each gate within u_t |g| + (E + 8) eps of the plain one (route_token's rounding to t, and both
// sides' float64 exp and sums over at most E terms). A yes/no check of the definition (power -1).
Verdict gates_against_plain(const MoeInputs& in, const MoeShape& s, DType t);

}  // namespace shardlab
