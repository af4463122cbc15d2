// The Transformer feed-forward layer, sharded, forward and backward (articles 001, 002, 003):
//
//   h = x W_in        x[B,S,M]  W_in[M,H]   h[B,S,H]      "bsm,mh->bsh"
//   g = gelu(h)                             g[B,S,H]      elementwise, erf form
//   y = g W_out       W_out[H,M]            y[B,S,M]      "bsh,hm->bsm"
//   L = sum(y * R)    R[B,S,M] fixed, so dL/dy = R (written dy)
//
// and the backward pass, four more contractions and one elementwise product:
//   dg     = dy W_out^T    "bsm,hm->bsh"      dW_out = g^T dy    "bsh,bsm->hm"
//   dh     = dg * gelu'(h)
//   dx     = dh W_in^T     "bsh,mh->bsm"      dW_in  = x^T dh    "bsm,bsh->mh"
//
// A strategy is data: the spec of each tensor (the table in ffn_strategy.cpp). Everything else is derived:
//  - every contraction, forward and backward, is planned by plan_contraction (harness/plan/planner.hpp)
//    from the specs its operands have at that point and the spec its result must reach;
//  - a "reshard" moves a held tensor to another spec: a free local slice where the new spec splits
//    a dim further, an AllGather where it splits less (steps of the planner's own PlanStep kinds);
//  - the backward pass follows the forward plans: the gradient of a contraction's result is first
//    resharded to that contraction's local product spec (partial sums dropped); each gradient
//    contraction then reaches the spec of the tensor it is the gradient of (dx ends like x, dW_in
//    like W_in), which is where the transposes of the forward collectives appear (a forward
//    AllGather returns as a ReduceScatter, a forward slice as an AllGather, and so on).
//  - the rule-2 choice (which operand gives up an outer dim when both sit on one mesh axis) is the
//    article's for the forward and the input gradients (gather the weight, keep the batch split);
//    for the weight gradients, where both operands are activations, the cheaper of the two plans
//    (fewer bytes per device) is kept.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/runtime.hpp"
#include "core/mesh.hpp"
#include "core/named.hpp"
#include "core/spec.hpp"
#include "core/tensor.hpp"
#include "harness/plan/planner.hpp"
#include "harness/check/report.hpp"
#include "harness/check/verify.hpp"
#include "harness/check/plan_ledger.hpp"

namespace shardlab {

class Session;

struct FfnDims {
  std::size_t b = 8, s = 4, m = 16, h = 64;  // batch, sequence, embed (model), hidden = 4 M
};
// "B=8,S=4,M=16,H=64" (any order and case; letters left out keep these defaults), or "article"
// for article 001's sizes B=8, S=512, M=5120, H=20480. Error(parse) names the bad entry.
FfnDims parse_ffn_dims(const std::string& text);
FfnDims article_ffn_dims();
std::string ffn_dims_text(const FfnDims& d);  // "B=8,S=4,M=16,H=64"
Shape ffn_x_shape(const FfnDims& d);          // [B, S, M]: x, y, dy, dx
Shape ffn_h_shape(const FfnDims& d);          // [B, S, H]: h, g, dg, dh

// One strategy. Spec texts use placeholder axes renamed to the mesh's own: on a two-axis mesh X and
// Y are its first and second axis; on a one-axis mesh Y is its only axis; D is every axis of the
// mesh as one group (X,Y,...). x_in and g_in are the specs x and g are resharded to before their
// contraction ("" = as held). With `rules`, x, W_in, h, W_out and y come instead from the FFN's
// logical dim names (ffn_logical_names) through those rules, as in the article's Flax code.
struct FfnStrategy {
  std::string name, description, source;
  int mesh_axes = 1;  // 1 or 2 axes exactly; 0 = any mesh
  std::string rules;  // "batch->X,hidden->Y,..." or ""
  std::string x, x_in, w_in, h, g_in, w_out, y;
};
const std::vector<FfnStrategy>& ffn_strategies();  // gspmd, column, row, pairwise, row_column, data
const FfnStrategy& ffn_strategy(const std::string& name);  // Error(parse) listing the names
std::string ffn_strategy_names();                          // "gspmd|column|..."
// The mesh a strategy runs on by default: X=2,Y=4 for two axes (the article's), else a line of
// `line` devices, Y for the one-axis Megatron cuts and X for data parallelism.
std::string ffn_default_mesh(const FfnStrategy& s, int line = 4);

// Logical dim names of x, W_in, h, W_out, y: (batch, seq, embed), (embed_kernel, hidden), ...
struct FfnLogical {
  std::string tensor;
  std::vector<std::string> dims;
};
std::vector<FfnLogical> ffn_logical_names();
// The strategy's rules with X and Y renamed to the mesh's axes ("" when it has none).
AxisMapping ffn_rules(const FfnStrategy& s, const Mesh& mesh);

struct FfnSpecs {
  Spec x, x_in, w_in, h, g_in, w_out, y;
};
// The specs on this mesh; Error(parse) for a mesh of the wrong rank, Error from Spec::validate for
// dims that do not divide.
FfnSpecs ffn_specs(const FfnStrategy& s, const Mesh& mesh, const FfnDims& dims);

struct FfnConfig {
  std::string strategy = "gspmd";
  FfnDims dims;
  std::string inputs;  // a lesson's --inputs: x, W_in, W_out (dy: R) read from it (case_run_io.hpp)
  bool backward = false;
  std::uint64_t seed = 0;
  DType dtype = DType::float32;    // element type stored and moved (core/dtype.hpp)
  bool finite_differences = true;  // with backward: the gradient rules by central differences
  // full: the unsharded layer on one device, every element compared; sketch: each stage checked
  // on its own inputs with random projections (ffn_run.cpp); auto: full up to
  // ffn_full_verify_flops unsharded FLOPs, sketch above.
  std::string verify = "auto";
  // The sharded run's expected seconds, for the progress display's estimate (bench ffn sets it
  // from the GEMM rate it measures); 0: measured when the display is on and the layer is large.
  double expected_run_seconds = 0;
  // Warm steps (bench ffn --steps): the sharded run repeated this many times after the first, on
  // the same inputs, each timed (not verified: the first run is, and the program is the same).
  int steps = 0;
  // Keep this run's inputs for the next run_ffn that also shares them with the same dims, seed,
  // passes and --inputs file (in this process; lesson 10 runs three layouts on one set); a run that
  // does not share them frees a kept set before it makes its own.
  bool share_inputs = false;
};
// Above this many unsharded FLOPs (fwd + bwd) "auto" verification sketches. The full check costs
// about 20 float32 GEMMs of the layer's size (ffn_check.hpp: four unsharded runs, the contractions
// again in blocks, the bounds' float64 products), about ten times the sharded run, so the limit
// keeps it to seconds (`shardlab bench ffn --verify full` times it).
constexpr double ffn_full_verify_flops = 5e10;
std::string parse_verify_mode(const std::string& text);  // "full" | "sketch" | "auto"; else Error(parse)

enum class FfnPhase { forward, backward };
std::string phase_name(FfnPhase p);  // "forward" | "backward"

// One step of the layer on every device.
struct FfnStage {
  enum class Kind { reshard, contraction, gelu, gelu_backward };
  Kind kind = Kind::contraction;
  FfnPhase phase = FfnPhase::forward;
  std::string title;            // "h = x W_in", "reshard dy"
  std::string out;              // the tensor it writes (a reshard rewrites its input in place)
  std::vector<std::string> in;  // the tensors it reads
  Plan plan;                    // contraction: the planner's plan
  std::vector<PlanStep> steps;  // reshard: gathers and slices, in order
  Spec out_spec;                // spec of `out` afterwards
  Shape out_shape;              // its global shape
  std::size_t extra_bytes = 0;  // transient buffers while it runs (see plan_ffn)
  std::vector<std::string> frees;  // tensors no later stage reads, dropped after this one
  std::vector<const PlanStep*> collectives() const;
  std::size_t predicted_bytes() const;
};

struct FfnPlan {
  FfnConfig config;
  FfnStrategy strategy;
  Mesh mesh;
  FfnSpecs specs;
  std::vector<FfnStage> stages;
  std::vector<const PlanStep*> collectives(FfnPhase phase) const;
  std::vector<const PlanStep*> collectives() const;       // both phases, in order
  std::size_t predicted_bytes_per_device(FfnPhase phase) const;
  std::size_t predicted_bytes_per_device() const;
  double flops_per_device() const;  // every contraction's local product
  double unsharded_flops() const;
  // Memory per device, in bytes: `stored` = the most that live local blocks take between stages;
  // `peak` adds the transient buffers of a stage while it runs. Unsharded: the same program on one
  // device with whole tensors (no gathers, so only the new result is transient).
  std::size_t stored_bytes_per_device = 0, peak_bytes_per_device = 0;
  std::size_t unsharded_stored_bytes = 0, unsharded_peak_bytes = 0;
};

// Plans the layer without running it: predicted bytes, memory and FLOPs per device. Throws Error
// (exit 2 in binaries) for an unknown strategy, a mesh of the wrong rank, or dims that do not divide.
FfnPlan plan_ffn(const Mesh& mesh, const FfnConfig& config);
// Before anything is allocated: refuses (one sentence with the estimate) a run whose devices here
// (the mesh on sim, 1 under MPI) at their predicted peak plus the full tensors once in float64 exceed
// what the machine has available.
void refuse_ffn_over_memory(const FfnPlan& plan, const FfnConfig& config, int devices_here);

// Empty when a run's collectives are the plan's (reshards and contractions, both phases), in order,
// with the predicted bytes; otherwise the first difference in words (plan_vs_ledger on all steps).
std::string ffn_plan_vs_ledger(const FfnPlan& plan, const std::vector<CollectiveSummary>& run);

// The plan, stage by stage: each contraction's plan_text, each reshard's steps.
std::string ffn_plan_text(const FfnPlan& plan);
// "all_gather x over Y; all_gather W_in over X; ..." for one phase.
std::string ffn_collectives_summary(const FfnPlan& plan, FfnPhase phase);

// Inputs from the seed: x and R small integers in [-2, 2]; W_in and W_out integers in [-2, 2]
// divided by 8, exact binary fractions, so x W_in is exact in any summation order.
// Generated straight in the element type T (the numbers are exact in all three types).
template <class T>
struct FfnInputsOf {
  xt::xarray<T> x, w_in, w_out, r;  // r empty for a forward-only run
};
using FfnInputs = FfnInputsOf<double>;
FfnInputs ffn_inputs(const FfnDims& dims, std::uint64_t seed);
template <class T>
FfnInputsOf<T> ffn_inputs_as(const FfnDims& dims, std::uint64_t seed, bool backward);

// The SPMD program: every device takes its blocks of the inputs and runs the stages. It returns
// its blocks of y (and dx, dW_in, dW_out), plus one-element tensors "peak_bytes" and
// "stored_bytes" measured from the blocks it held.
SpmdProgram ffn_program(const FfnPlan& plan, const FfnInputs& in);

struct FfnResult {
  FfnPlan plan;
  std::vector<CollectiveSummary> collectives;  // this run's calls, in order (root only)
  std::size_t forward_collectives = 0;          // how many of them belong to the forward pass
  std::size_t bytes_per_device = 0;             // measured: most bytes sent by one device
  std::size_t peak_bytes_per_device = 0;        // measured: the largest over devices
  std::size_t stored_bytes_per_device = 0;
  std::vector<Verdict> checks;  // y (and dx, dW_in, dW_out, gradient rules), planner agreement
  std::string verify;           // "full" or "sketch": what was used
  // Wall time of each phase (root): generating inputs, the sharded run, verification.
  double seconds_inputs = 0, seconds_run = 0, seconds_verify = 0;
  std::vector<double> seconds_steps;  // each warm step after the first (FfnConfig::steps)
  std::vector<double> cpu_seconds_steps;  // the process's CPU time (user + system) in each of them
  bool pass() const;
};

// C = A B (A [..., k], B [k, n], C [..., n], leading dims folded into rows) checked by sketch as
// the layer's sketch stages are (sketch.hpp: 20 vectors, 64 rows recomputed, float32 calibrated),
// for a run in element type t that summed `terms` products a device and added `group` partial
// sums; the tensors hold values of type t. `one_in`: the fraction of rows whose miss is printed.
Verdict sketch_contraction(const std::string& name, const Tensor& c, const Tensor& a, const Tensor& b, std::size_t terms,
                           std::size_t group, DType t, std::uint64_t seed, std::size_t one_in);

// Plans, runs on every device and checks against the unsharded layer (ffn_check.hpp; root only; elsewhere the result
// carries the plan alone). The Session form records the run's ledger and checks in its report.
FfnResult run_ffn(Runtime& runtime, const Mesh& mesh, const FfnConfig& config);
FfnResult run_ffn(Session& session, const FfnConfig& config);

// Tables for people: the run's collectives with a phase column; memory and FLOPs per device.
std::string ffn_collectives_table(const FfnResult& r);
std::string ffn_memory_text(const FfnResult& r);
// Stores the result's figures in a report's `numbers` and `strings` for --json.
void ffn_report_fields(const FfnResult& r, Report& report);

}  // namespace shardlab
