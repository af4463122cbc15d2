// The unsharded reference of a program (harness/plan/program.hpp) and how far a sharded run may
// differ from it, element by element.
//
// Both runs store every tensor in the element type t (unit roundoff u) and use the same kernels;
// they differ in the order of sums (contractions and sum/mean over split dims). The reference
// carries, beside each value V, a bound E with |sharded - reference| <= E, elementwise:
//   inputs          E = 0 (both runs read the same values)
//   einsum C = AB   E_C = |A| E_B + E_A |B| + E_A E_B + (p_G + p_1) |A||B| + (r_G + r_1) |C|, where
//                   p_G, r_G are gemm_rounding(t, K, G) (harness/check/verify.hpp) for the sharded run,
//                   whose local sums over K terms are added over a group of G devices, and p_1, r_1
//                   the same for the reference (G = 1): each run is within p |A||B| + r |C| of the
//                   exact product of what it multiplied
//   unary f         E = s E_in + 2u |f(V)|, s = the largest |f'| on [V - E_in, V + E_in]
//                   (core/ops.hpp), 2u for the two runs' own roundings of f; relu_grad, a step,
//                   moves by 1 where that interval reaches across 0
//   add, sub        E = E_a + E_b + 2u |V|;  mul: |a| E_b + E_a |b| + E_a E_b + 2u |V|
//   div             (E_a |b| + |a| E_b) / (|b| (|b| - E_b)) + 2u |V|, infinite where |b| <= E_b
//   sum over n      E = sum E_in + 2 (n + G) u sum |x| (two orders of n terms, each partial sum
//                   rounded in t at most G more times); mean divides both by n
//   max             E = max E_in (max moves by at most its inputs' largest move)
//   softmax         E = s (e^{2D} - 1) + 2 (n + 3) u s, D = the row's largest E_in: shifting each
//                   input by at most D scales every exp by e^{+-D} and their sum likewise
//   broadcast       E = |scale| E_in (repeated) + 2u |V|
//   eq              E = 1 where |a - b| <= E_a + E_b > 0 (the runs may disagree), else 0
//   is_max(x, m)    E = 0 where the row's values, each moved by at most its E, keep the element
//                   strictly above all others (1 in both runs) or strictly below another (0 in
//                   both), or the row has no error at all; else 1
//   Where a bound meets inf * 0 (a divisor that may reach 0, times a zero) it is unknown: inf.
// Flush to zero (core/dtype.hpp): every rounding turns a value below the type's smallest normal L
// into 0, an absolute error of at most L. An einsum adds each run's gemm_rounding().absolute and a
// sum over n 2 (n + G) L, where their bound is positive (elsewhere every term is 0 in both runs);
// unary, binary and broadcast add 2L where move > 0 and |V| < L + move (move: the bound before
// their own rounding; the same function of the same values flushes alike); softmax adds
// 2 L e^{2D} where |V| is below that; an op on partial sums G L.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/einsum.hpp"
#include "core/tensor.hpp"
#include "collectives/runtime.hpp"
#include "harness/check/verify.hpp"
#include "harness/plan/program.hpp"
#include "harness/plan/program_plan.hpp"

namespace shardlab {

struct ProgramReference {
  std::map<std::string, Tensor> values;  // every tensor, unsharded, rounded to the element type
  std::map<std::string, Tensor> bounds;  // |sharded - reference| may reach this, elementwise
};

// The inputs: random multiples of 1/64 in [-1, 1] (exact in every element type; fine enough that
// ties, where a max's gradient is uncertain, are rare), one seed per input.
std::map<std::string, Tensor> program_inputs(const TensorProgram& p, std::uint64_t seed);

// Runs the program on whole tensors. groups[i]: how many devices' partial sums the sharded run adds
// for op i (1 when it sums on one device); missing entries, or no groups, take `devices`.
// on_partials[i]: op i runs on each device's partial sums (a linear op before their completion):
// each device rounds its part, and their magnitudes, not the sum's, set the rounding. Its bound
// adds G u M, M the sum over devices of the parts' magnitudes (for an einsum's product |A||B|,
// carried through the linear ops) and G the group that later adds them.
ProgramReference run_reference(const TensorProgram& p, const std::map<std::string, Tensor>& inputs, DType dtype,
                               int devices, const std::vector<int>& groups = {},
                               const std::vector<bool>& on_partials = {});

// How a reference sums a contraction or a sum over dims: in `chunks` blocks of the longest
// contracted (reduced) letter, each block's sum rounded to the element type and the blocks added
// one at a time in it, from the first block or (reverse) the last. 1: one sum, as the kernel does.
struct SumOrder {
  int chunks = 1;
  bool reverse = false;
};
// One op of p on whole tensors (`values` holds its operands), rounded to the element type.
Tensor op_value(const TensorProgram& p, const ProgramOp& op, const std::map<std::string, Tensor>& values, DType dtype,
                SumOrder order = {});

// The reference a sharded run is checked against: run_reference's values, with each tensor's
// bound tightened to what rounding in a different order actually does. The worst-case bounds
// above are sound but ignore cancellation, so through a normalisation or a long backward pass
// they reach 1e3-1e9 times the real rounding. So the program is run again three times in other
// orders, as sharded runs sum: in G blocks (G = the devices op i's sum is split over, at least 2),
// in G blocks added from the last, and in 2G + 1 blocks, each block rounded to the element type as
// a device's partial sum is. S = the largest |R_order - R| over a tensor's elements and the three
// orders: how far a change of order moved it, rounding amplified by everything downstream. Each
// element's bound becomes
//     min(worst-case bound, kOrderSpreadFactor * S + 2 u max|R| + 2 L)
// (2 u max|R| + 2 L: the two runs' last roundings or flushes, for a tensor every order happens to
// compute alike; 0 for a tensor of zeros in every order).
// This is statistical, not a proof: the sharded run is one more order, and it fails only if its
// largest difference exceeds kOrderSpreadFactor times the largest of three others'.
constexpr double kOrderSpreadFactor = 4.0;
ProgramReference checked_reference(const TensorProgram& p, const std::map<std::string, Tensor>& inputs, DType dtype,
                                   int devices, const std::vector<int>& groups = {},
                                   const std::vector<bool>& on_partials = {});

// C = einsum(eq; a, b) on whole tensors, for a run in `dtype` whose partial sums of C are added
// over a group of `devices`: the one checker's value and per-element bound, as for a one-op
// program (inputs A and B, output C; checked_reference). Where every product and partial sum is an
// integer the type holds exactly (integer operands, terms * max|a| * max|b| <= 1/u), any order of
// the sums gives the same bits: the value is exact and the bound 0.
struct ExpectedTensor {
  Tensor value, bound;
  bool exact = false;  // every element of bound is 0
};
ExpectedTensor contraction_expected(const Einsum& eq, const Tensor& a, const Tensor& b, DType dtype, int devices);

// Uneven "pad": padding holds 0 after every op. Each device's kPaddingDirty flags
// (program_plan.hpp) say whether an op left a nonzero in its stored block's padding (exp, rsqrt
// or shift run over the zeros without masking again, say); an einsum over the padded dim would add
// it in. Fails naming the first such op and device; no check (name empty) when the plan is not
// padded. Not a comparison of values: power -1.
inline constexpr const char* kPaddingCheck = "padding holds 0 after every op (uneven = \"pad\")";
Verdict padding_check(const ProgramPlan& plan, const RunResult& run);

}  // namespace shardlab
