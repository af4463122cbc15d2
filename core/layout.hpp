// Layout: which block of a global tensor each device holds under a Spec, and the reverse,
// stitching the global tensor back together from every device's block.
#pragma once
#include <string>
#include <vector>

#include "core/mesh.hpp"
#include "core/spec.hpp"
#include "core/tensor.hpp"

namespace shardlab {

struct Block {
  std::vector<std::size_t> start, stop;  // half-open index range per dim
  Shape shape() const;
  std::string text() const;  // "[0:16, 64:128]"
};

Block block_of(const Mesh& mesh, const Spec& spec, const Shape& global, int device);
Shape local_shape(const Mesh& mesh, const Spec& spec, const Shape& global);
Tensor local_block(const Tensor& global, const Mesh& mesh, const Spec& spec, int device);

// The global tensor from one block per device (blocks[d] from device d). Replicas must agree bit
// for bit; blocks that differ only along the spec's partial axes are summed.
struct Assembly {
  Tensor tensor;
  bool replicas_agree = true;
  std::string disagreement;  // first replica mismatch, in words
};
Assembly assemble(const Mesh& mesh, const Spec& spec, const Shape& global, const std::vector<Tensor>& blocks,
                  const std::string& tensor);

// Raw block copies along one dim of a row-major buffer of `shape`, for collectives.
// copy_out: elements [begin, begin+len) of `dim` into a contiguous buffer; copy_in: the reverse.
void copy_out(const double* src, const Shape& shape, std::size_t dim, std::size_t begin, std::size_t len, double* dst);
void copy_in(double* dst, const Shape& shape, std::size_t dim, std::size_t begin, std::size_t len, const double* src);

}  // namespace shardlab
