// Roll: a tensor's elements moved `by` places along one dim, wrapping round (torch.roll, jnp.roll):
// out[.., i, ..] = x[.., (i - by) mod size, ..]. The unsharded meaning of a program's roll op
// (harness/plan/program.hpp); on a mesh, where the dim is split and `by` is whole blocks, it is a
// collective_permute of the blocks (collectives/permute.hpp).
#pragma once
#include <cstddef>

#include "core/tensor.hpp"

namespace shardlab {

Tensor roll_op(const Tensor& x, std::size_t dim, long by);

}  // namespace shardlab
