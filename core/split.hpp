// Split and concat along a dim of parts (Megatron's fused QKV: qkv[b,s,n,j,d] with j = 3 parts,
// q = part 0, k = part 1, v = part 2). The unsharded meaning of a program's split and concat ops
// (harness/plan/program.hpp), and what one device computes where that dim is whole.
//   split_op:  out[.., ..] = x[.., part, ..]: the dim at `dim` dropped, one part of it kept
//   concat_op: out[.., k, ..] = parts[k][.., ..]: the parts stacked along a new dim at `dim`
#pragma once
#include <cstddef>
#include <vector>

#include "core/tensor.hpp"

namespace shardlab {

Tensor split_op(const Tensor& x, std::size_t dim, std::size_t part);
// Every part must have the same shape; Error(shape_mismatch) otherwise.
Tensor concat_op(const std::vector<Tensor>& parts, std::size_t dim);

}  // namespace shardlab
