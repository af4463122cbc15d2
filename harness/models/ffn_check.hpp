// The FFN checked as every program is: its full verification runs the
// layer as a TensorProgram (harness/plan/program.hpp), the same three ops a case file writes
// (harness/cases/gspmd_ffn.toml), with the gradient program derived by rule when there is a
// backward, through the program checker's reference and bounds (checked_reference,
// harness/check/program_check.hpp). Each contraction's group - how many devices' partial sums the
// sharded run adds - comes from the FFN's own plan. The sketch verification of article-size layers
// (ffn_run.cpp) needs the same groups and the exactness test below.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "harness/check/verify.hpp"
#include "harness/models/ffn.hpp"
#include "harness/plan/program.hpp"

namespace shardlab {

// How many devices' partial sums each contraction adds (1 when no device reduces): the product of
// the group sizes of its plan's ReduceScatter and AllReduce steps.
struct FfnGroups {
  std::size_t h = 1, y = 1, dg = 1, dw_out = 1, dx = 1, dw_in = 1;
};
FfnGroups ffn_reduction_groups(const FfnPlan& plan);

// True when every partial sum of a contraction with operands on the 1/8 grid (x and dy integers,
// W_in and W_out eighths, ffn_inputs) is exact in t: a sum of |terms| at most `abs_sum` is a whole
// number of eighths below 8 abs_sum, exact while that stays within t's exact integers (1/u).
// in_compute: exact in t's compute arithmetic instead (float32 for bfloat16).
bool exact_in_eighths(double abs_sum, DType t, bool in_compute = false);

// The layer as a program: inputs x[b,s,m], W_in[m,h], W_out[h,m]; h = einsum(x, W_in),
// g = gelu(h), y = einsum(g, W_out); output y.
TensorProgram ffn_tensor_program(const FfnDims& dims);

// The sharded run's whole tensors (`got`: y, and with a backward dx, dW_in, dW_out, in float64,
// exact copies of the run's values) against the unsharded program on `inputs` (x, W_in, W_out, and
// dy = R with a backward) in the plan's element type, element by element under checked_reference's
// bounds. One Verdict per tensor, named "y vs unsharded", "dx vs unsharded analytic", ...
std::vector<Verdict> ffn_full_checks(const FfnPlan& plan, const std::map<std::string, Tensor>& inputs,
                                     const std::map<std::string, Tensor>& got);

// The gradient rules the FFN's backward uses, by central differences on the program
// (central_difference_checks, harness/check/gradient_check.hpp): a check of the derivation, on
// inputs of its own, once per program.
std::vector<Verdict> ffn_rule_checks(const FfnDims& dims, std::uint64_t seed);

}  // namespace shardlab
