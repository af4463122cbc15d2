// 3D parallelism (article 004, "DP+PP+TP+ZeRO"): a mesh D x P x T. Along T, tensor parallelism
// (Megatron): each stage is one MLP block y = tanh(x W1) W2 with W1 cut by columns and W2 by rows,
// one AllReduce over T forward and one backward. Along P, pipeline stages: stage p's output goes to
// stage p+1 by send/recv, micro-batch by micro-batch (GPipe). Along D, data parallelism with
// ZeRO-1: the batch is split, and after the backward each weight shard's gradient is
// reduce-scattered over D, Adam steps the owned rows (with the owned m and v), and the rows are
// all-gathered back. Device (d, p, t) holds stage p's W1[:, t-th columns] and W2[t-th rows, :].
// With zero_stage 2 (ZeRO-2: gradients sharded too) a device keeps only its owned gradient rows, so
// each micro-batch's gradient is reduce-scattered over D as soon as its backward has run: m
// ReduceScatters a step instead of one (article 004 on why 3D parallelism stays with ZeRO-1).
// Loss L = sum over the whole batch of y * R.
// Sizes that do not divide the mesh: under uneven chunk the hidden columns are cut over
// T as torch.chunk cuts them and the shards' rows over D likewise, moved by the _v collectives;
// under pad every cut is stored at ceil(n/parts) with zero padding, which stays zero (tanh(0) = 0,
// its gradients are 0, and Adam does not move a weight whose gradient is 0).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/runtime.hpp"
#include "core/dtype.hpp"
#include "core/mesh.hpp"
#include "harness/check/verify.hpp"
#include "harness/models/training.hpp"

namespace shardlab {

struct ThreeDConfig {
  int data = 2, pipe = 2, tensor = 2;  // mesh D=data, P=pipe, T=tensor
  int chunks = 2;                      // micro-batches per replica
  int zero_stage = 1;                  // 1: gradients summed, then one ReduceScatter; 2: one per micro-batch
  std::size_t width = 8, hidden = 16, micro_batch = 2;
  AdamParams adam;
  std::uint64_t seed = 0;
  Uneven uneven = Uneven::none;        // how hidden over T and the shards' rows over D split
};
std::string three_d_mesh(const ThreeDConfig& c);  // "D=2,P=2,T=2"

struct ThreeDInputs {
  std::vector<Tensor> w1, w2;  // per stage: [width, hidden], [hidden, width]
  std::vector<Tensor> x, r;    // per replica and micro-batch (index d * chunks + c): [b, width]
};
// Error(not_divisible) under Uneven::none when hidden does not split over T, or a shard's rows over D.
ThreeDInputs three_d_inputs(const ThreeDConfig& c);

// What device (d, ., t) holds: stage weights' hidden columns (W1) and rows (W2) [h0, h1), stored
// as `hidden` (with zero padding under pad), and the rows of its W1 shard (width) and W2 shard
// (hidden) it owns over D for ZeRO.
struct ThreeDCut {
  std::size_t h0, h1, hidden;
  RowSlicing w1_rows, w2_rows;
};
ThreeDCut three_d_cut(const ThreeDConfig& c, int d, int t);
// Device t's shard of a stage's whole W1 (by_cols) or W2 as it stores it: its hidden block, padded.
Tensor three_d_shard(const ThreeDConfig& c, const Tensor& whole, int t, bool by_cols);

// The unsharded step: the whole batch through every stage, one Adam step. Weights after it,
// step-1 gradients, and tolerances for a run that moved element type `wire` (as lesson 15's:
// rounding of what crossed the wire, and Adam's step either way where a gradient is within its
// rounding of 0).
struct ThreeDReference {
  std::vector<Tensor> w1, w2, g1, g2;
  std::vector<Tensor> w1_tol, w2_tol, g1_tol, g2_tol;
  Tensor y, y_tol;  // the last stage's output for the whole batch (micro-batches in order), and its bound
  Verdict adam_scalar;  // the step of stage 0's W1 against Adam written plainly (adam_check.hpp)
};
ThreeDReference three_d_reference(const ThreeDConfig& c, const ThreeDInputs& in, DType wire);

// Device (d, p, t)'s program. Returns "W1", "W2" (its shards after the step), "dW1", "dW2" (the
// summed gradient rows it owns after the ReduceScatter(s) over D), "grad_held" [1] (the most
// gradient elements it held at once: its whole shards with ZeRO-1, the owned rows with ZeRO-2) and, on the last stage, "y": the
// outputs of its micro-batches one after another (its data shard's rows of the batch's output).
SpmdProgram three_d_program(const ThreeDConfig& c, const ThreeDInputs& in);

// Which mesh axis a ledger row's traffic crosses: "T", "D", or "P" for send/recv.
std::string traffic_axis(const LedgerRow& row);

// Bytes device (d, ., t) sends over D in one step: a ReduceScatter of its W1 and W2 shards'
// gradients (one, or one per micro-batch with ZeRO-2) and an AllGather of the updated rows, by the
// ring's formulas (collectives/predict.hpp): evenly, (D-1)/D of the 2 width (hidden/T) elements each.
double zero_d_bytes(const ThreeDConfig& c, std::size_t element_bytes, int d, int t);
int zero_reduce_scatters(const ThreeDConfig& c);  // per weight: 1, or m with ZeRO-2

// One Adam step of a run against the unsharded model: the last stage's output, the owned gradient
// rows and the weight shards of every device, each as one verdict (named with `tag` in front).
std::vector<Verdict> three_d_check(const Mesh& mesh, const ThreeDConfig& c, const RunResult& run,
                                   const ThreeDReference& ref, const std::string& tag);

}  // namespace shardlab
