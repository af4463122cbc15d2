// The planner: GSPMD in miniature for one contraction. Given an einsum of two operands, their
// specs and optionally the output spec, it derives the steps each device runs, following the
// rules of article 001 in this order (each rule is one function in planner.cpp, so a search for
// cheaper plans can later sit beside them):
//
//  1. Contracting (and batch) dims: both operands must split such a dim the same way. Each keeps
//     the longest common leading part of the two mesh-axis lists and all-gathers the rest.
//     Equal lists move nothing, and the local product is then a partial sum over those axes
//     (Case 1A); different lists are gathered away (Case 1B).
//  2. Outer (free) dims: if a free dim of A and a free dim of B sit on the same mesh axis, the
//     devices would each see only matching slices and some pairs of rows and columns would never
//     meet. By default B (the weight) is gathered on that axis and A (the batch) stays split.
//  3. The local contraction, on BLAS.
//  4. Reaching the output spec: a partial sum becomes ReduceScatter where the output splits a
//     dim over that axis (free local slices first where they help), otherwise AllReduce; then
//     AllGather the dims that are split more than the output wants; then slice locally (free)
//     the dims the output splits further. With no output spec the result is the product's own
//     spec with every partial sum all-reduced.
//
// A mesh axis split needs its own suffix of a dim's axis list to gather: a dim on (X,Y) can gather
// Y alone or X and Y together, not X alone (the blocks left would not be contiguous).
// Each step carries its predicted bytes per device: predicted_bytes_sent of its collective on
// the local block it starts from.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "collectives/device.hpp"
#include "collectives/runtime.hpp"
#include "core/einsum.hpp"
#include "core/mesh.hpp"
#include "core/spec.hpp"
#include "core/tensor.hpp"

namespace shardlab {

struct Hardware;           // harness/cost/cost.hpp

// collective_permute: a program's roll op over a split dim by whole blocks (harness/plan/program.hpp):
// every device's block moves `shift` places along the group over `axes` (collectives/permute.hpp).
enum class StepKind {
  all_gather, local_slice, contract, all_reduce, reduce_scatter, all_to_all, all_reduce_max, collective_permute
};
std::string step_kind_name(StepKind kind);  // "all_gather" ... as in the ledger

struct PlanStep {
  StepKind kind = StepKind::contract;
  int operand = 0;                 // 0 = A, 1 = B, 2 = the result
  std::string tensor;              // its label, as written into the ledger
  std::vector<std::string> axes;   // mesh axes of the group (or of the slice)
  int dim = -1;                    // the tensor dim it acts on; -1 for contract and all_reduce
  int to_dim = -1;                 // all_to_all: the dim the axis moves to (it leaves `dim`)
  int shift = 0;                   // collective_permute: places each block moves along the group
  Spec before, after;              // the tensor's spec around this step
  Shape local_before, local_after; // its local block shape around this step
  std::size_t predicted_bytes = 0; // bytes sent by one device (0 for local steps)
  double flops = 0;                // contract only: per device
  std::string reason;              // why, in one phrase
  Shape global;                    // the tensor's global shape: uneven blocks need it
  bool communicates() const { return kind != StepKind::contract && kind != StepKind::local_slice; }
};

struct Operand {
  std::string name;  // "A", "x", "W_in"
  Spec spec;
  Shape shape;
};

struct PlanOptions {
  // Rule 2: which operand gives up its split outer dim. The article keeps the batch split.
  bool gather_first_on_outer_conflict = false;
  std::string result_name = "C";
  std::size_t element_bytes = 8;  // of the element type the plan moves and stores (Runtime's default, float64)
  // The search's objective: null, the fewest bytes per device; else the least modeled time on this
  // hardware (collectives by the alpha-beta model, the contraction at its matmul rate).
  const Hardware* time_on = nullptr;
};

struct Plan {
  Einsum eq;
  Mesh mesh;
  Operand a, b;                 // as given
  std::string result_name;
  Shape out_shape;
  Spec a_used, b_used;          // the operands' specs when multiplied
  Spec product;                 // the local product's spec; may carry partial sums
  Spec out_spec;                // the spec the result ends with
  bool out_given = false;       // out_spec came from the caller
  std::size_t element_bytes = 8;  // from PlanOptions: bytes per element moved and stored
  std::vector<PlanStep> steps;

  std::size_t predicted_bytes_per_device() const;  // sum over steps
  double flops_per_device() const;                 // of the contract step
  double unsharded_flops() const;                  // the same contraction on one device
  std::vector<const PlanStep*> collectives() const;
  // Bytes one device holds: operand blocks as given, as multiplied, and the result block.
  std::size_t stored_bytes() const;
  std::size_t working_bytes() const;
};

// Derives the plan; throws Error naming the tensor, axis and sizes for specs that do not fit
// the mesh or the shapes, and Error(unsupported) for inputs carrying partial sums.
Plan plan_contraction(const Einsum& eq, const Mesh& mesh, const Operand& a, const Operand& b,
                      const std::optional<Spec>& out = std::nullopt, const PlanOptions& options = {});

// Running a plan (plan_execute.cpp).
// Runs the plan on one device: `a_local` and `b_local` are this device's blocks of A and B
// under their given specs; returns its block of the result under plan.out_spec.
// T: double, float or bfloat16 (double blocks compute as dev.dtype(); see einsum.hpp).
template <class T>
xt::xarray<T> execute_plan(Device& dev, const Plan& plan, const xt::xarray<T>& a_local, const xt::xarray<T>& b_local);

// Runs steps that each act on one tensor (gathers, slices, AllToAll, AllReduce, ReduceScatter;
// no contraction) on this device's block x. Instantiated for double (blocks computed and moved as
// dev.dtype()).
template <class T>
xt::xarray<T> execute_steps(Device& dev, const std::vector<PlanStep>& steps, const xt::xarray<T>& x);

// The SPMD program for a Runtime: each device takes its blocks of the global `a` and `b`, runs
// the plan, and returns {result_name: its block of the result}.
SpmdProgram plan_spmd(const Plan& plan, const Tensor& a, const Tensor& b);

// Printing a plan (plan_text.cpp).
// The plan as numbered, aligned lines: op, tensor, axes, dim, spec change, local shapes, bytes.
std::string plan_text(const Plan& plan);
// One line: "all_gather A over Y; all_gather B over X; contract; " for JSON and summaries.
std::string plan_summary(const Plan& plan);
// Dim names for notation: the einsum letters in upper case ("ik" -> {"I", "K"}).
std::vector<std::string> dim_names(const std::string& letters);

}  // namespace shardlab
