// Planning and running a whole program (harness/plan/program.hpp) from its propagated specs
// (harness/plan/propagate.hpp). Every op runs where its output's spec says:
//   einsum    the planner's search (harness/plan/plan_search.hpp) from the operands' specs to the
//             output's spec;
//   unary     its input resharded to the output's spec, then applied locally;
//   binary    each operand resharded to the output's spec on the dims it has, then combined locally;
//   sum/mean  applied locally to the input as it lies; a reduced dim that was split leaves partial
//             sums over its axes, and the reshard search completes them (AllReduce or ReduceScatter)
//             into the output's spec;
//   max       the reduced dims gathered first (max has no partial form here), then applied locally;
//   softmax   its input resharded to the output's spec (which holds the softmax dim whole).
// Reshards are the search's fewest-bytes steps (harness/plan/plan_search.hpp: search_reshard).
// Partial sums wait: an einsum whose output is read only by linear ops (add, sub, neg, copy,
// scale, rename) over partial sums alike keeps its product's partial sums, the linear ops work on
// them as they are, and the first op that needs them whole completes them once (a gradient's
// contributions are added before one AllReduce, as Megatron's backward does for x).
// A copy an einsum moved an operand into is kept for every later einsum of the same pass whose
// plan from the copy sends fewer bytes than from the tensor as stored (a gradient's two einsums
// both read dz; q, k and v all read the layer norm's output: each is gathered once, as a
// hand-written layer would). A rename is the same blocks under new letters, so a copy of x serves
// x_t = rename(x) too, and x_t is never gathered apart. A copy lives until the last einsum that
// reuses it. Nothing is kept across the start of the backward ops (`backward_from`): in a model of
// many layers a layer's backward runs long after its forward, so an activation or weight gathered
// for the forward is gathered again for the backward (Megatron's default). With `keep_gathered`
// (a case file's keep_gathered = true) the forward's copies are kept for the backward einsums that
// can start from them: fewer bytes sent, more held (harness/plan/keep_gathered.hpp prices both).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "collectives/runtime.hpp"
#include "core/dtype.hpp"
#include "core/mesh.hpp"
#include "harness/plan/gradient.hpp"
#include "harness/plan/planner.hpp"
#include "harness/plan/program.hpp"
#include "harness/plan/propagate.hpp"

namespace shardlab {

struct OpPlan {
  std::size_t op = 0;                          // index into TensorProgram::ops
  bool has_contraction = false;
  Plan contraction;                            // einsum: the search's plan
  bool reuse[2] = {false, false};              // einsum: operand k starts from a copy of it (or of
                                               // the tensor it renames) an earlier einsum moved
  std::size_t reuse_op[2] = {0, 0};            // ... that einsum (an index into ops)
  int reuse_operand[2] = {0, 0};               // ... and which of its operands the copy is
  std::vector<std::vector<PlanStep>> reshard;  // per operand: steps to where the op computes
  Spec computed;                               // the output as the local kernel leaves it (may be partial)
  std::vector<PlanStep> finish;                // from `computed` to the output's spec
  std::vector<const PlanStep*> collectives() const;  // every communicating step, in order
  double flops_per_device = 0;                 // einsum only
};

struct ProgramPlan {
  TensorProgram program;   // with backward, gradient.program
  GradientProgram gradient;  // with backward: how `program` was derived (no grads without)
  Mesh mesh;
  Propagation propagation;
  DType dtype = DType::float32;
  std::vector<OpPlan> ops;
  std::size_t backward_from = SIZE_MAX;  // the first backward op (SIZE_MAX: none)
  bool keep_gathered = false;            // the forward's moved copies reused by the backward
  bool article = false;                  // each einsum by the articles' rules
  // Each tensor as devices hold it: its propagated spec, or partial sums where completing them
  // waits for an op that needs them whole (see plan_tensor_program).
  std::map<std::string, Spec> stored;
  std::vector<const PlanStep*> collectives() const;  // every op's, in run order
  std::size_t predicted_bytes_per_device() const;
  // "all_gather x over Y", one per collective in run order, as case files' expect.collectives say it.
  std::vector<std::string> collective_lines() const;
};

// Error(unsupported) naming the op when no plan reaches an op's output spec. `article`: each
// einsum by the articles' rules (plan_contraction) instead of the search.
ProgramPlan plan_tensor_program(const TensorProgram& program, const Mesh& mesh, const Propagation& propagation,
                                DType dtype, bool article = false, std::size_t backward_from = SIZE_MAX,
                                bool keep_gathered = false);

// Per op, how many devices' partial sums the run adds (the sizes of the partial-sum axes its
// product or reduction leaves; 1 when none): what run_reference's bounds need.
std::vector<int> partial_groups(const ProgramPlan& plan);
// Per op, whether it works on partial sums (a linear op whose operands are held so).
std::vector<bool> on_partial_sums(const ProgramPlan& plan);

// Every op with its steps: numbered lines, op label, the steps (collective, tensor, axes, bytes).
std::string program_plan_text(const ProgramPlan& plan);

// The SPMD program: each device takes its blocks of `inputs` under their propagated specs, runs
// every op, and returns its blocks of the outputs plus "peak_bytes" (the most bytes of tensors it
// held at once, in the element type: live tensors and an op's resharded operands and result).
// Under Uneven::pad also kPaddingDirty: one flag per op of the plan, 1 when the op's result as
// stored held a nonzero past its real rows (every op must leave zeros there: an einsum over a
// padded dim would count them). Measured on every op, whatever it is, for the verifier to check.
inline constexpr const char* kPaddingDirty = "padding_dirty";
SpmdProgram program_spmd(const ProgramPlan& plan, const std::map<std::string, Tensor>& inputs);

// The bytes a device holds at most, as program_spmd counts them, predicted from the plan.
std::size_t predicted_peak_bytes(const ProgramPlan& plan);

// Whether the plan's steps move operand k before the product (a spec that differs only in axes
// of size 1 moves nothing and makes no copy): the einsum then holds a moved copy of it.
bool moves_operand(const Plan& p, int k);

// A roll op (harness/plan/program.hpp) under out's spec: the dim it rolls, and where that dim is
// split over axes of more than one device, the axes and the whole blocks each block moves along
// them (0 to n-1). Error(unsupported) when the roll is not whole blocks of a split dim.
struct RollSplit {
  std::size_t dim = 0;
  std::vector<std::string> axes;  // empty: the dim is whole on every device, a local roll
  long shift = 0;
};
RollSplit roll_split(const TensorProgram& p, const Mesh& mesh, const ProgramOp& op, const Spec& out);

}  // namespace shardlab
