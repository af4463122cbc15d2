// Verification: a sharded result against the unsharded one computed in the same program.
// Data movement must match bit for bit (tolerance 0); reductions get reduction_tolerance().
#pragma once
#include <string>
#include <vector>

#include "collectives/runtime.hpp"
#include "core/mesh.hpp"
#include "core/spec.hpp"
#include "core/tensor.hpp"

namespace shardlab {

struct Verdict {
  std::string name;        // what was checked, e.g. "C"
  bool pass = true;
  double max_abs_error = 0;
  double tolerance = 0;
  std::string detail;      // first bad index or replica disagreement, empty on PASS
  std::string line() const;  // "PASS max_abs_err=0 (exact)" / "FAIL C: ... at [2, 3] got 5 want 4"
};

Verdict compare(const std::string& name, const Tensor& got, const Tensor& want, double tolerance = 0.0);

// Tolerance for comparing two sums of the same `terms` numbers added in different orders (the
// sharded sum adds local partial sums, then combines them over the ring; the reference adds
// left to right). Each ordering is a recursive summation, whose error is at most
// (terms-1) * u * sum|x_i| with u = DBL_EPSILON/2 (Higham, Accuracy and Stability, eq. 4.4).
// Two such sums differ by at most twice that, and sum|x_i| <= terms * max_abs_term, so
//     tol = 2 * (terms-1) * u * terms * max_abs_term = (terms-1) * DBL_EPSILON * terms * max_abs_term.
// Integer inputs whose sums stay below 2^53 are exact; then the error is 0 and any tol passes.
double reduction_tolerance(std::size_t terms, double max_abs_term);
// The same for sums held in element type t (unit roundoff u = unit_roundoff(t)): float64 is the
// formula above; float32 and bfloat16 also round partial sums moved between devices and the stored
// result in t. Each side adds `terms` products in its compute arithmetic (unit roundoff u_c:
// float32's for both) and stores a partial sum in t at most devices + 1 times (the local result,
// each ring step of a ReduceScatter, the result), each within u_t of a value no larger than
// terms * max_abs_term:   tol = 2 (terms u_c + (devices + 1) u_t) terms max_abs_term.
double reduction_tolerance(std::size_t terms, double max_abs_term, DType t, int devices = 1);
// Integers whose sum stays within the type's exact integers (2^53, 2^24, 2^8): every order gives
// the same sum, so 0; otherwise reduction_tolerance.
double integer_sum_tolerance(std::size_t terms, double max_abs_term, DType t, int devices = 1);

// Stitch output `name` from every device's block under `spec` (replicas must agree bit for bit)
// and compare with `want`.
Verdict verify_output(const Mesh& mesh, const Spec& spec, const RunResult& run, const std::string& name,
                      const Tensor& want, double tolerance = 0.0);

}  // namespace shardlab
