// A mixture of experts on a user's own tensors (`shardlab moe --inputs F --save G`): the shape read
// from the arrays, and the run's routing and results written out, so that another framework
// (tests/torch/roundtrip.py: PyTorch) can recompute the gating, the capacity drops, the output and
// the gradients from the same inputs and compare.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "collectives/runtime.hpp"
#include "harness/check/npz.hpp"
#include "harness/models/moe.hpp"

namespace shardlab {

// The arrays an MoE reads: x [T, m], W_router [m, E], W_in [E, m, h], W_out [E, h, m] and
// optionally dy [T, m] (the upstream gradient of out; generated from the seed when absent).
// `s` with tokens, model, experts and hidden taken from them. Error(io) naming the first of x,
// W_router, W_in, W_out the arrays lack; Error(rank_mismatch) when their shapes disagree (the
// sentence names both arrays and the dim).
MoeShape moe_shape_of(const NamedArrays& files, MoeShape s);

// moe_inputs(s, seed) with each array the file names in its place, rounded to t (shapes and finite
// values checked as every --inputs is). Returns the lines saying what was read ("" without a file).
std::string read_moe_inputs(const std::string& path, MoeInputs& in, DType t);

// --save's arrays from the devices' blocks (root only; the run checked them against the unsharded
// MoE): out, dx, dW_router, dW_in, dW_out; the routing per token: logits [T, E], experts [T, k]
// (larger logit first), gates [T, k] (softmax over the k chosen logits), slot [T, k] (the place in
// the expert's buffer of its group, -1 when dropped); kept and routed [G, E] per group (a device's
// tokens); capacity [1] (C, slots per expert and group); dy [T, m] as the backward started from it.
std::vector<std::pair<std::string, Tensor>> moe_saved_arrays(const Mesh& mesh, const RunResult& run,
                                                             const MoeInputs& in, const MoeShape& s);

}  // namespace shardlab
