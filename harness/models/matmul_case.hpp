// What the matmul lessons (04-07) and `shardlab matmul` share: one sharding case of C = A B on a
// two-axis mesh, the blocks each device holds, and the work each device reports back.
//
// Work is measured on the devices: a program returns, beside its blocks, the scalar outputs
// "flops" (2*m*k*n of the local products it ran) and "bytes_held" (its blocks of A and B as
// multiplied, plus its block of C). work_text() sets them against the unsharded product spread
// over the devices, so duplicated work shows as a factor above 1.
#pragma once
#include <string>

#include "collectives/runtime.hpp"
#include "core/mesh.hpp"
#include "core/spec.hpp"
#include "core/tensor.hpp"
#include "harness/plan/planner.hpp"
#include "harness/check/verify.hpp"

namespace shardlab {

struct CollectiveSummary;

// The mesh's two axes play the article's X and Y; specs are written with "X" and "Y" and
// renamed to the mesh's own names (on mesh_rows=2,mesh_cols=4, "_,Y" means "_,mesh_cols").
struct MatmulCase {
  std::string x, y;                 // the mesh's axis names
  std::size_t m = 0, k = 0, n = 0;  // A is m x k, B is k x n
  Tensor a, b;                      // small integers: every sum is exact
  Tensor want;                      // A B by broadcast and sum (reference_einsum: no BLAS)
  Spec a_spec, b_spec;
  Plan plan;                        // what the planner derives from the two specs
};

// `shape` is "m,k,n". Throws Error for a mesh without two axes, a malformed shape, or specs that
// do not divide the shape. `element_bytes`: of the element type the plan counts (Session's).
MatmulCase matmul_case(const Mesh& mesh, const std::string& shape, const std::string& a_spec_xy,
                       const std::string& b_spec_xy, std::uint64_t seed, std::size_t element_bytes);
// The run's output `name` (C, or the partial sums it is made of, laid out by `spec`) against A B
// by the one checker (contraction_expected, harness/check/program_check.hpp): exact while the
// integer sums are (always in float32 and float64; k <= 16 in bfloat16), else checked_reference's
// bound for a run in t whose partial sums are added over the whole mesh.
Verdict verify_matmul(const Mesh& mesh, const Spec& spec, const RunResult& run, const std::string& name,
                      const MatmulCase& c, DType t);
// "_,Y" on this mesh: "X" and "Y" renamed to the mesh's first and second axis.
Spec case_spec(const Mesh& mesh, const std::string& spec_xy);
// The plan article 001's rules give another case of the same shapes (to compare costs).
Plan case_plan(const Mesh& mesh, const MatmulCase& c, const std::string& a_spec_xy, const std::string& b_spec_xy);

// Both inputs as each device holds them: article 001's form of each spec, the mesh with A's and
// then B's index ranges, and what the device the article follows (first axis 0, second axis 1) holds.
std::string inputs_text(const Mesh& mesh, const MatmulCase& c);
// A spec as article 001 writes it: "(full, sharded_Y)", one entry per dim.
std::string article_form(const Spec& spec);
// The device at first axis 0, second axis 1 (the one article 001 follows); -1 if the mesh has none.
int article_device(const Mesh& mesh);

// A program's outputs plus its work.
Outputs with_work(Outputs outs, double flops, std::size_t bytes_held);
// "FLOPs per device ...; memory per device ..." lines, from the devices' reports.
std::string work_text(const Mesh& mesh, const RunResult& run, double unsharded_flops, std::size_t unsharded_bytes);
// Devices that multiply the very same blocks of A and B, e.g. "{0,4} {1,5} {2,6} {3,7}".
std::string same_work_groups(const Mesh& mesh, const Plan& plan);
// One-line cost of a plan: "640 bytes sent and 512 FLOPs per device".
std::string cost_text(const Plan& plan);

// Verdict that the run's collectives are the planner's, op by op, with the bytes it predicted.
Verdict planner_agrees(const Plan& plan, const std::vector<CollectiveSummary>& run);

// The search's plan for the lesson's case (same specs and output), beside the articles'. When it
// sends fewer bytes it is run on the same devices (every rank calls this) and verified against
// A B and against its own prediction; `text` (root only) tells the learner what it does and what
// it saves, `checks` holds the verdicts (empty when the articles' plan is already the cheapest).
struct CheaperPlan {
  std::string text;
  std::vector<Verdict> checks;
};
CheaperPlan run_cheaper_plan(Runtime& runtime, const Mesh& mesh, const MatmulCase& c, DType dtype);

}  // namespace shardlab
