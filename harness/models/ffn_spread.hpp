// The FFN's full verification with tolerances that reach the power floors: ffn_bounds' worst-case
// bounds tightened by how much a change of summation order actually moves each tensor, as the
// program checker does (harness/check/program_check.hpp, checked_reference).
//
// Worst-case bounds are sound but ignore cancellation: at B=8,S=256,M=1024,H=4096 in float32 they
// allowed 1.1 on y (RMS 64: power 0.017 x RMS, WEAK) where the sharded run was off by 1.2e-4. So
// the unsharded layer is run twice more in T with its contractions summed as a sharded run sums:
// the longest contracted letter cut in G blocks (G = the stage's reduction group, at least 2) added
// from the last, and in 2G + 1 blocks added from the first, each block rounded to T as a device's
// partial sum is. S = the largest |R_order - R| over a tensor's elements and both orders: rounding
// in another order, carried through gelu and the backward pass. Each element's bound becomes
//     min(worst-case bound, kOrderSpreadFactor * S + 2 u max|R|)
// Statistical, not a proof: the sharded run is one more order, and fails only if it moves a tensor
// more than kOrderSpreadFactor (4) times the larger of two other orders' moves. Costs two more
// unsharded layers.
#pragma once
#include "harness/models/ffn.hpp"
#include "harness/models/ffn_bounds.hpp"

namespace shardlab {

// The unsharded layer with every contraction summed in `chunks` blocks of its longest contracted
// letter (blocks rounded to T, added from the last when `reverse`); chunks = 1: ffn_reference.
// groups (when given) replaces `chunks` per stage: G or 2G + 1 with G = max(2, the stage's group).
template <class T>
FfnReferenceOf<T> ffn_reference_in_blocks(const FfnInputsOf<T>& in, bool backward, const FfnGroups& groups,
                                          bool reverse, int extra);

// Tightens `bounds` (ffn_bounds of `ref`) by the spread of the two other orders, as above.
template <class T>
void tighten_by_order_spread(FfnBounds& bounds, const FfnInputsOf<T>& in, const FfnReferenceOf<T>& ref,
                             const FfnGroups& groups, bool backward);

}  // namespace shardlab
