// bfloat16 rounds to nearest: an independent check that runs inside every bfloat16 program run.
// The sharded run and its unsharded reference round through the same conversions (core/dtype.hpp),
// so a conversion that truncated instead of rounding would agree with itself and pass every
// comparison between them. This check holds the reference's own values against float64 instead:
//   einsum C = AB     |C - AB| <= p |A||B| + r |C| + a + K eps |A||B|, gemm_rounding(bfloat16, K)
//                     (float32 products and sums, one rounding of the result to bfloat16) plus the
//                     float64 product's own error over K terms
//   add, sub, mul     |V - op(a, b)| <= u / (1 - u) |V| + L (one rounding to nearest, or a flush)
// with the operands as the reference holds them (exact in bfloat16). Rounding to nearest keeps
// every element within it; truncation toward zero is off by up to 2u relative, so about half the
// elements of any product break it. A yes/no check of the rounding mode (power -1): a fault in the
// sharded path does not reach it.
#pragma once
#include "core/dtype.hpp"
#include "harness/check/program_check.hpp"
#include "harness/check/verify.hpp"
#include "harness/plan/program.hpp"

namespace shardlab {

inline constexpr const char* kRoundingCheck = "bfloat16 rounds to nearest: the unsharded program against float64";
// Every einsum, add, sub and mul of p, with the reference's values; no check (name empty) when t
// is not bfloat16 or p has no such op.
Verdict rounding_check(const TensorProgram& p, const ProgramReference& ref, DType t);

}  // namespace shardlab
