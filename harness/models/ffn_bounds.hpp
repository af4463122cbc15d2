// Per-element error bounds for checking the sharded FFN against the unsharded reference (full
// verification) and the group sizes the sketch needs. The derivation is in ffn_bounds.cpp.
#pragma once
#include <cstddef>

#include "harness/models/ffn.hpp"

namespace shardlab {

// How many devices' partial sums each contraction adds (1 when no device reduces): the product of
// the group sizes of its plan's ReduceScatter and AllReduce steps.
struct FfnGroups {
  std::size_t h = 1, y = 1, dg = 1, dw_out = 1, dx = 1, dw_in = 1;
};
FfnGroups ffn_reduction_groups(const FfnPlan& plan);

// Each element's bound on |sharded - reference|, in float64, same shapes as the tensors. The
// gradient tensors stay default (0-d) for a forward-only reference.
struct FfnBounds {
  Tensor h, g, y, dg, dh, dx, dw_in, dw_out;
};
// in and ref are the reference's inputs and results in T (ffn_reference). Costs one float64
// contraction on absolute values per contraction of the layer.
template <class T>
FfnBounds ffn_bounds(const FfnInputsOf<T>& in, const FfnReferenceOf<T>& ref, const FfnGroups& groups);

// True when every partial sum of a contraction with operands on the 1/8 grid (x and dy integers,
// W_in and W_out eighths, ffn_inputs) is exact in t: a sum of |terms| at most `abs_sum` is a whole
// number of eighths below 8 abs_sum, exact while that stays within t's exact integers (1/u).
// in_compute: exact in t's compute arithmetic instead (float32 for bfloat16).
bool exact_in_eighths(double abs_sum, DType t, bool in_compute = false);

constexpr double kGeluSlope = 1.13;  // max |gelu'(z)| = 1.1289 at z = sqrt 2
constexpr double kGeluCurve = 0.80;  // max |gelu''(z)| = 2 phi(0) = 0.7979 at z = 0

}  // namespace shardlab
