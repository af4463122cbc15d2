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
template <class T>
xt::xarray<T> local_block(const xt::xarray<T>& global, const Mesh& mesh, const Spec& spec, int device);
// Block b of a row-major tensor of shape `global` at `global_data`, copied out to the contiguous
// `block` (take) or in from it (put). One std::copy per run along the last dim.
template <class T>
void take_block(const T* global_data, const Shape& global, const Block& b, T* block);
template <class T>
void put_block(T* global_data, const Shape& global, const Block& b, const T* block);

// The global tensor from one block per device (blocks[d] from device d). Replicas must agree bit
// for bit; blocks that differ only along the spec's partial axes are summed.
struct Assembly {
  Tensor tensor;
  bool replicas_agree = true;
  std::string disagreement;  // first replica mismatch, in words
};
Assembly assemble(const Mesh& mesh, const Spec& spec, const Shape& global, const std::vector<Tensor>& blocks,
                  const std::string& tensor);

// Raw block copies along one dim of a row-major buffer of `shape`, for collectives, converting
// between element types on the way (a plain memcpy when they are the same).
// copy_out: elements [begin, begin+len) of `dim` into a contiguous buffer; copy_in: the reverse.
void copy_out(const void* src, DType src_type, const Shape& shape, std::size_t dim, std::size_t begin,
              std::size_t len, void* dst, DType dst_type);
void copy_in(void* dst, DType dst_type, const Shape& shape, std::size_t dim, std::size_t begin, std::size_t len,
             const void* src, DType src_type);
// Elements before `dim` in row-major order (the product of the sizes of dims 0..dim-1): when it is
// 1, the blocks along dim are contiguous and in order, so copy_out/copy_in are plain copies.
inline std::size_t outer_size(const Shape& shape, std::size_t dim) {
  std::size_t outer = 1;
  for (std::size_t d = 0; d < dim && d < shape.size(); ++d) outer *= shape[d];
  return outer;
}

}  // namespace shardlab
