#include "harness/models/three_d_gpt3.hpp"

namespace shardlab {

std::vector<Gpt3Axis> gpt3_axes(int D, int P, int T, const Gpt3Shape& g) {
  const double layers = g.layers / P, act = g.tokens * g.hidden * g.element_bytes, m = g.micro_batches;
  Gpt3Axis t{"T", T, "4 AllReduces a layer and micro-batch"};
  if (T > 1) {
    t.calls = m * layers * 4;
    t.steps = 2.0 * (T - 1);
    t.bytes = t.calls * 2.0 * (T - 1) / T * act;
  }
  Gpt3Axis p{"P", P, "activations forward, gradients back"};
  if (P > 1) {
    p.calls = m * (P > 2 ? 2 : 1);  // the busiest stage: a middle one sends both ways
    p.steps = 1;
    p.bytes = p.calls * act;
  }
  Gpt3Axis d{"D", D, "gradients scattered, weights gathered"};
  if (D > 1) {
    const double shard = 12 * g.hidden * g.hidden * layers / T * g.element_bytes;  // a device's weights
    d.calls = 2.0 * 2 * layers;  // a ReduceScatter and an AllGather of each layer's 2 matrices
    d.steps = D - 1;
    d.bytes = 2.0 * (D - 1) / D * shard;
  }
  return {t, p, d};
}

double gpt3_axis_seconds(const Gpt3Axis& a, const Hardware& link) {
  if (a.calls == 0) return 0;
  return a.calls * (link.launch + a.steps * link.alpha) + a.bytes / link.bytes_per_s;
}

std::string gpt3_keep_inside(const std::vector<Gpt3Axis>& axes, const Hardware& fast, const Hardware& slow) {
  std::string best;
  double gain = 0;
  for (const auto& a : axes) {
    const double g = gpt3_axis_seconds(a, slow) - gpt3_axis_seconds(a, fast);
    if (g > gain) {
      gain = g;
      best = a.name;
    }
  }
  return best;
}

Gpt3Zero gpt3_zero(int D, int P, int T, const Gpt3Shape& g) {
  Gpt3Zero z;
  const double weights_here = g.weights() / (P * T), m = g.micro_batches;
  z.grads_whole_gb = g.weights() * g.element_bytes / 1e9;
  z.grads_here_gb = weights_here * g.element_bytes / 1e9;
  z.states_here_gb = weights_here * 12 / 1e9;
  if (D == 1) return z;
  const double part = (D - 1.0) / D * weights_here * g.element_bytes, matrices = 2 * g.layers / P;
  // Collectives a step, each of a device's whole shard: ZeRO-1 one ReduceScatter and one AllGather;
  // ZeRO-2 a ReduceScatter per micro-batch; ZeRO-3 also gathers the weights before each
  // micro-batch's forward and again before its backward, since it keeps only 1/D of them.
  const double per_step[4] = {0, 2, m + 1, 3 * m};
  for (int s = 1; s <= 3; ++s) {
    z.d_bytes[s] = per_step[s] * part;
    z.d_calls[s] = per_step[s] * matrices;
  }
  return z;
}

}  // namespace shardlab
