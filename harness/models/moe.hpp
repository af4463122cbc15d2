// A mixture-of-experts FFN with expert parallelism (GShard, Lepikhin et al. 2020; the JAX scaling
// book's MoE section), forward and backward, sharded and unsharded.
//
//   router     logits[t, e] = x[t, :] . W_r[:, e]; each token takes the top_k experts (larger
//              logit first, ties to the lower index) and gates = softmax over those k logits
//   expert e   y = relu(x W_in[e]) W_out[e]          W_in [E, m, h], W_out [E, h, m]
//   combine    out[t] = sum_k gate_k y_{e_k}(x[t])   (a dropped assignment adds nothing)
//   loss       L = sum(out * dout), dout given: the backward gives dx, dW_r, dW_in, dW_out
//
// Capacity: the batch is cut into groups (one per device: its own tokens); in each group an expert
// takes at most C = ceil(capacity_factor * top_k * group_tokens / E) tokens, the first C routed to
// it in token order; the rest of its assignments are dropped (counted).
//
// Sharded (moe_device): the batch split over every mesh axis, the experts over the last axis (n
// devices, E/n experts each) and replicated over the others (data parallelism of the experts). Each
// device packs its tokens into a buffer [E, C, m] by expert and slot; an AllToAll over the expert
// axis sends each expert's slots to its device ([E/n, n C, m] there); the experts run; a second
// AllToAll returns the results to the tokens' devices, which combine them with the gates. The
// backward mirrors it (two more AllToAlls), then AllReduces dW_r over all axes and dW_in, dW_out
// over the data axes. Each AllToAll sends (n-1)/n of E C m elements per device.
//
// Numbers: compute in float64, and every stored tensor (logits, gates, activations, gradients,
// everything moved) rounded to the run's element type, at the same points in the reference. The
// reference (moe_reference) loops over tokens unsharded; where a sum has an order (a device's sum
// over its slots, an AllReduce) it sums in the same order, and its AllReduces add partial sums as
// the ring does (ring_order_sum), so sharded and unsharded agree bit for bit in every type.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/runtime.hpp"
#include "core/tensor.hpp"
#include "harness/models/moe_expert.hpp"

namespace shardlab {

struct MoeShape {
  int experts = 8;
  int top_k = 2;
  double capacity_factor = 1.0;
  std::size_t tokens = 128;  // the whole batch
  std::size_t model = 8;     // m
  std::size_t hidden = 16;   // h, per expert
};

// x, dout [T, m]; w_router [m, E]; w_in [E, m, h]; w_out [E, h, m]: small integers from `seed`
// (x, weights in [-1, 1], router in [-2, 2], dout in [-2, 2]), exact in every element type.
struct MoeInputs {
  Tensor x, w_router, w_in, w_out, dout;
};
MoeInputs moe_inputs(const MoeShape& s, std::uint64_t seed);

// Error(parse) naming the flag for experts outside [1, 1024], top_k outside [1, experts], a capacity factor <= 0
// or above 64, tokens not divisible by `devices`, or experts not divisible by `expert_devices`.
void check_moe_shape(const MoeShape& s, int devices, int expert_devices);

// C = ceil(capacity_factor * top_k * group_tokens / experts), at least 1.
std::size_t moe_capacity(const MoeShape& s, std::size_t group_tokens);

// What the sharded run and the reference both produce. kept and routed [G, E]: group g's
// assignments to each expert kept under capacity and routed in all.
struct MoeResult {
  Tensor out, dx, dw_router, dw_in, dw_out, kept, routed;
};

// The sum of `parts` (same shape) as a ring AllReduce of this runtime adds them
// (collectives/ring.cpp): the flat buffer cut into n chunks, chunk c summed from member c+1 round
// to member c, each part and each partial sum rounded to t. `blocks`: the parts are that many
// equal blocks along dim 0 (one per device of another axis: its experts), each all-reduced alone.
Tensor ring_order_sum(const std::vector<Tensor>& parts, DType t, std::size_t blocks = 1);

// The unsharded MoE on `groups` groups of consecutive tokens (one per device), `replicas` copies of
// each expert (the data axes' size; consecutive groups of groups/replicas share one copy).
MoeResult moe_reference(const MoeInputs& in, const MoeShape& s, int groups, int replicas, DType t);

// The sharded program on one device (mesh as above). Outputs: out, dx [T/G, m]; dW_router [m, E]
// (the same on every device); dW_in [E/n, m, h], dW_out [E/n, h, m] (its experts); kept, routed
// [1, E] (its group's counts).
Outputs moe_device(Device& dev, const MoeInputs& in, const MoeShape& s);

// Bytes each device sends in one of the AllToAlls: (n-1)/n of E C m elements.
std::size_t moe_all_to_all_bytes(const MoeShape& s, std::size_t capacity, int expert_devices,
                                 std::size_t element_bytes);

}  // namespace shardlab
