#include "harness/models/moe_gate_check.hpp"

#include <cfloat>
#include <cmath>
#include <string>

#include "core/text.hpp"
#include "harness/models/moe_expert.hpp"

namespace shardlab {

PlainRoute plain_softmax_top_k(const std::vector<double>& logits, int top_k) {
  double largest = -INFINITY;
  for (double l : logits) largest = std::fmax(largest, l);
  std::vector<double> p(logits.size());
  double total = 0;
  for (std::size_t e = 0; e < logits.size(); ++e) total += p[e] = std::exp(logits[e] - largest);
  for (double& v : p) v /= total;
  PlainRoute r;
  std::vector<bool> taken(logits.size(), false);
  double chosen = 0;
  for (int k = 0; k < top_k; ++k) {
    int best = -1;
    for (std::size_t e = 0; e < p.size(); ++e)
      if (!taken[e] && (best < 0 || p[e] > p[static_cast<std::size_t>(best)])) best = static_cast<int>(e);
    taken[static_cast<std::size_t>(best)] = true;
    r.experts.push_back(best);
    chosen += p[static_cast<std::size_t>(best)];
  }
  for (int e : r.experts) r.gates.push_back(p[static_cast<std::size_t>(e)] / chosen);
  return r;
}

Verdict gates_against_plain(const MoeInputs& in, const MoeShape& s, DType t) {
  const std::size_t T = s.tokens, K = static_cast<std::size_t>(s.top_k);
  Tensor got = xt::zeros<double>({T, K}), want = got, tol = got;
  const double u = unit_roundoff(t), slack = double(s.experts + 8) * DBL_EPSILON;
  std::string wrong_expert;
  for (std::size_t tok = 0; tok < T; ++tok) {
    const auto logits = token_logits(in.x, in.w_router, tok, s.experts, t);
    const TokenRoute shared = route_token(logits.data(), s.experts, s.top_k, t);
    const PlainRoute plain = plain_softmax_top_k(logits, s.top_k);
    for (std::size_t k = 0; k < K; ++k) {
      if (wrong_expert.empty() && shared.experts[k] != plain.experts[k])
        wrong_expert = "token " + std::to_string(tok) + " choice " + std::to_string(k) + ": expert " +
                       std::to_string(shared.experts[k]) + ", the plain top-k says " + std::to_string(plain.experts[k]);
      got(tok, k) = shared.gates[k];
      want(tok, k) = plain.gates[k];
      tol(tok, k) = u * std::fabs(plain.gates[k]) + slack;
    }
  }
  Verdict v = compare("gates against a plain softmax-top-k", got, want, tol);
  // A yes/no check of the shared definition, not of the sharded path: no power of its own.
  v.power = -1;
  v.claim = "catches a gate off by more than u|g|";
  if (!wrong_expert.empty()) v.pass = false, v.detail = wrong_expert;
  if (v.pass)
    v.detail = std::to_string(T) + " tokens: the same experts, each gate within u|g| (worst " +
               format_number(v.worst_ratio, "%.2g") + " of it)";
  return v;
}

}  // namespace shardlab
