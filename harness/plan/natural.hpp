// The natural output of a contraction: the layout propagation gives its result when nobody asks
// for one, as GSPMD (article 002) and PyTorch DTensor give it, and as propagate.hpp's rule 3 gives
// an einsum inside a program:
//   - each output dim takes the mesh axes its letter has in the operand split into more blocks
//     (A on a tie): a free dim keeps its operand's split, and a batch dim split in one operand
//     only stays split (the other operand's slice is cut locally, for free);
//   - no dim is split that no operand splits;
//   - a mesh axis splits at most one dim: the output dims pick in order (for ik,kj->ij, i first),
//     so when a free dim of A and one of B sit on the same axis, A keeps it and B is gathered
//     (article 001's rule: the batch stays split, the weight gives up its split). With
//     `keep_b_on_clash` (--outer-gather A) B's free dims pick first;
//   - an axis that does not divide what is left of its dim is dropped, unless the mesh splits
//     unevenly (chunk or pad);
//   - partial sums over the contracted dims' axes are completed (AllReduce): the result holds none.
#pragma once
#include "core/einsum.hpp"
#include "core/mesh.hpp"
#include "core/spec.hpp"
#include "core/tensor.hpp"

namespace shardlab {

Spec natural_output(const Einsum& eq, const Mesh& mesh, const Spec& a, const Spec& b, const Shape& out_shape,
                    bool keep_b_on_clash = false);

}  // namespace shardlab
