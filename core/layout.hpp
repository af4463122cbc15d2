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
  std::vector<std::size_t> start, stop;  // half-open index range per dim: the real elements
  std::vector<std::size_t> pad;          // Uneven::pad: zeros stored after them, per dim (else 0)
  Shape shape() const;                   // the real extents
  Shape stored_shape() const;            // what the device holds: real extents plus padding
  bool padded() const;
  std::string text() const;  // "[0:16, 64:128]"; padding as "[43981:50257+7, 0:64]"
};

// One dim of one device's block (core/mesh.hpp's Uneven says how dims that do not divide split).
struct DimBlock {
  std::size_t start = 0, stop = 0;  // real rows [start, stop) of the global dim
  std::size_t stored = 0;           // rows held: stop - start, or ceil(d/n) under Uneven::pad
};
DimBlock dim_block(const Mesh& mesh, const Spec& spec, const Shape& global, std::size_t dim, int device);
// Every device holds a block of the same shape with no padding (each dim divides its axes).
bool is_even(const Mesh& mesh, const Spec& spec, const Shape& global);

Block block_of(const Mesh& mesh, const Spec& spec, const Shape& global, int device);
// The block device 0 stores, the largest (uneven blocks are longest first, at every level).
Shape local_shape(const Mesh& mesh, const Spec& spec, const Shape& global);
// Device `device`'s block as it stores it (padding zero-filled).
template <class T>
xt::xarray<T> local_block(const xt::xarray<T>& global, const Mesh& mesh, const Spec& spec, int device);
// Under Uneven::pad a block is stored as b.stored_shape(), its real elements at the front of every
// dim: real_part keeps those alone, padded_block puts real elements back in front of zeros. Both
// return their argument when b has no padding.
template <class T>
xt::xarray<T> real_part(const xt::xarray<T>& stored, const Block& b);
template <class T>
xt::xarray<T> padded_block(const xt::xarray<T>& real, const Block& b);
// Block b of a row-major tensor of shape `global` at `global_data`, copied out to the contiguous
// `block` (take) or in from it (put). One std::copy per run along the last dim.
template <class T>
void take_block(const T* global_data, const Shape& global, const Block& b, T* block);
template <class T>
void put_block(T* global_data, const Shape& global, const Block& b, const T* block);

// The global tensor from one block per device (blocks[d] from device d, as stored). Only real
// elements are read (padding never reaches the result). Replicas must agree bit for bit; blocks
// that differ only along the spec's partial axes are summed.
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
// Rows [src_begin, src_begin+len) of `dim` of src (shape src_shape) to rows [dst_begin, ...) of dst
// (shape dst_shape; the other dims equal), both of type t: how padded blocks are repacked.
void copy_rows(const void* src, const Shape& src_shape, std::size_t src_begin, std::size_t len, void* dst,
               const Shape& dst_shape, std::size_t dst_begin, std::size_t dim, DType t);
// Elements before `dim` in row-major order (the product of the sizes of dims 0..dim-1): when it is
// 1, the blocks along dim are contiguous and in order, so copy_out/copy_in are plain copies.
inline std::size_t outer_size(const Shape& shape, std::size_t dim) {
  std::size_t outer = 1;
  for (std::size_t d = 0; d < dim && d < shape.size(); ++d) outer *= shape[d];
  return outer;
}

}  // namespace shardlab
