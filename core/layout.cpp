#include "core/layout.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

#include <xtensor/xstrided_view.hpp>

#include "core/error.hpp"

namespace shardlab {

Shape Block::shape() const {
  Shape s;
  for (std::size_t i = 0; i < start.size(); ++i) s.push_back(stop[i] - start[i]);
  return s;
}

Shape Block::stored_shape() const {
  Shape s = shape();
  for (std::size_t i = 0; i < pad.size() && i < s.size(); ++i) s[i] += pad[i];
  return s;
}

bool Block::padded() const {
  for (std::size_t p : pad)
    if (p) return true;
  return false;
}

std::string Block::text() const {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < start.size(); ++i) {
    out << (i ? ", " : "") << start[i] << ":" << stop[i];
    if (i < pad.size() && pad[i]) out << "+" << pad[i];
  }
  out << "]";
  return out.str();
}

DimBlock dim_block(const Mesh& mesh, const Spec& spec, const Shape& global, std::size_t dim, int device) {
  // Level by level over the dim's axes, major first: a block of len rows splits over n devices
  // into blocks of q = ceil(len/n) rows, the k-th [k q, (k+1) q) clipped to len (torch.chunk).
  // Padded, every block holds q rows at every level, so ceil(d/n1/n2...) = ceil(d/(n1 n2 ...)).
  DimBlock b{0, global[dim], global[dim]};
  const auto coords = mesh.coords(device);
  for (const auto& a : spec.dims[dim]) {
    const std::size_t n = static_cast<std::size_t>(mesh.axis_size(a));
    const std::size_t k = static_cast<std::size_t>(coords[static_cast<std::size_t>(mesh.axis(a))]);
    const std::size_t len = b.stop - b.start, q = (len + n - 1) / n;
    const std::size_t lo = std::min(k * q, len), hi = std::min((k + 1) * q, len);
    b.stop = b.start + hi;
    b.start += lo;
    b.stored = (b.stored + n - 1) / n;
  }
  if (mesh.uneven() != Uneven::pad) b.stored = b.stop - b.start;
  return b;
}

bool is_even(const Mesh& mesh, const Spec& spec, const Shape& global) {
  for (std::size_t i = 0; i < spec.rank() && i < global.size(); ++i)
    if (global[i] % static_cast<std::size_t>(spec.shards(mesh, i)) != 0) return false;
  return true;
}

Block block_of(const Mesh& mesh, const Spec& spec, const Shape& global, int device) {
  spec.validate(mesh, global, "tensor");
  Block b;
  for (std::size_t i = 0; i < global.size(); ++i) {
    const DimBlock d = dim_block(mesh, spec, global, i, device);
    b.start.push_back(d.start);
    b.stop.push_back(d.stop);
    b.pad.push_back(d.stored - (d.stop - d.start));
  }
  return b;
}

Shape local_shape(const Mesh& mesh, const Spec& spec, const Shape& global) {
  return block_of(mesh, spec, global, 0).stored_shape();
}

namespace {
xt::xstrided_slice_vector slices(const Block& b) {
  xt::xstrided_slice_vector sv;
  for (std::size_t i = 0; i < b.start.size(); ++i) sv.push_back(xt::range(b.start[i], b.stop[i]));
  return sv;
}
}  // namespace

namespace {
// Calls f(global_offset, block_offset, run) for each contiguous run of block b of a row-major
// tensor of shape `global`: one per index of the block's leading dims, `run` elements long.
template <class F>
void for_each_run(const Shape& global, const Block& b, F f) {
  const std::size_t rank = global.size();
  if (rank == 0) return f(0, 0, 1);
  const Shape bs = b.shape();
  if (element_count(bs) == 0) return;
  std::vector<std::size_t> stride(rank, 1);
  for (std::size_t d = rank - 1; d-- > 0;) stride[d] = stride[d + 1] * global[d + 1];
  const std::size_t run = bs[rank - 1];
  std::vector<std::size_t> idx(rank, 0);  // over the block's leading dims
  for (std::size_t local = 0;; local += run) {
    std::size_t off = b.start[rank - 1];
    for (std::size_t d = 0; d + 1 < rank; ++d) off += (b.start[d] + idx[d]) * stride[d];
    f(off, local, run);
    std::size_t d = rank - 1;
    while (d-- > 0) {
      if (++idx[d] < bs[d]) break;
      idx[d] = 0;
    }
    if (d == static_cast<std::size_t>(-1)) return;
  }
}
}  // namespace

template <class T>
void take_block(const T* global_data, const Shape& global, const Block& b, T* block) {
  for_each_run(global, b, [&](std::size_t g, std::size_t l, std::size_t n) {
    std::copy(global_data + g, global_data + g + n, block + l);
  });
}

template <class T>
void put_block(T* global_data, const Shape& global, const Block& b, const T* block) {
  for_each_run(global, b, [&](std::size_t g, std::size_t l, std::size_t n) {
    std::copy(block + l, block + l + n, global_data + g);
  });
}

namespace {
// The real part of a stored block: at the front of every dim.
Block front_of(const Block& b) {
  Block front;
  front.start.assign(b.start.size(), 0);
  front.stop = b.shape();
  return front;
}
}  // namespace

template <class T>
xt::xarray<T> real_part(const xt::xarray<T>& stored, const Block& b) {
  if (!b.padded()) return stored;
  xt::xarray<T> real = xt::empty<T>(b.shape());
  take_block(stored.data(), b.stored_shape(), front_of(b), real.data());
  return real;
}

template <class T>
xt::xarray<T> padded_block(const xt::xarray<T>& real, const Block& b) {
  if (!b.padded()) return real;
  xt::xarray<T> out = xt::zeros<T>(b.stored_shape());
  put_block(out.data(), b.stored_shape(), front_of(b), real.data());
  return out;
}

template <class T>
xt::xarray<T> local_block(const xt::xarray<T>& global, const Mesh& mesh, const Spec& spec, int device) {
  const Block b = block_of(mesh, spec, shape_of(global), device);
  xt::xarray<T> real = xt::empty<T>(b.shape());
  take_block(global.data(), shape_of(global), b, real.data());
  if (!b.padded()) return real;
  return padded_block(real, b);
}

#define SHARDLAB_BLOCKS(T)                                                                   \
  template void take_block<T>(const T*, const Shape&, const Block&, T*);                    \
  template void put_block<T>(T*, const Shape&, const Block&, const T*);                     \
  template xt::xarray<T> local_block<T>(const xt::xarray<T>&, const Mesh&, const Spec&, int);   \
  template xt::xarray<T> real_part<T>(const xt::xarray<T>&, const Block&);                   \
  template xt::xarray<T> padded_block<T>(const xt::xarray<T>&, const Block&);
SHARDLAB_BLOCKS(double)
SHARDLAB_BLOCKS(float)
SHARDLAB_BLOCKS(bfloat16)
#undef SHARDLAB_BLOCKS

Assembly assemble(const Mesh& mesh, const Spec& spec, const Shape& global, const std::vector<Tensor>& blocks,
                  const std::string& tensor) {
  spec.validate(mesh, global, tensor);
  if (blocks.size() != static_cast<std::size_t>(mesh.devices()))
    throw Error(ErrorKind::rank_mismatch, "assembling " + tensor + " needs " + std::to_string(mesh.devices()) +
                                              " blocks, got " + std::to_string(blocks.size()));
  Assembly out;
  out.tensor = xt::zeros<double>(global);
  // One partial term per index along the partial axes; replicas within a term must agree.
  const int terms = mesh.axes_size(spec.partial);
  for (int t = 0; t < terms; ++t) {
    Tensor term = xt::zeros<double>(global);
    Tensor seen = xt::zeros<double>(global);  // 1 where some replica already wrote
    for (int d = 0; d < mesh.devices(); ++d) {
      if (mesh.index_along(d, spec.partial) != t) continue;
      Block b = block_of(mesh, spec, global, d);
      if (shape_of(blocks[d]) != b.stored_shape())
        throw Error(ErrorKind::rank_mismatch, "device " + std::to_string(d) + " holds " + tensor + " block " +
                                                  shape_text(shape_of(blocks[d])) + ", expected " +
                                                  shape_text(b.stored_shape()));
      if (element_count(b.shape()) == 0) continue;  // an empty block (uneven chunks) holds nothing
      auto view = xt::strided_view(term, slices(b));
      auto seen_view = xt::strided_view(seen, slices(b));
      // Padded blocks: only the real part, at the front of each dim, is read.
      Tensor real;
      if (b.padded()) {
        Block front;
        front.start.assign(b.start.size(), 0);
        front.stop = b.shape();
        real = xt::empty<double>(b.shape());
        take_block(blocks[d].data(), b.stored_shape(), front, real.data());
      }
      const Tensor& mine = b.padded() ? real : blocks[d];
      if (out.replicas_agree) {
        // Compare with what an earlier replica wrote; all three are row-major over the block.
        const Tensor before = view, was_seen = seen_view;
        for (std::size_t k = 0; k < mine.size(); ++k) {
          if (was_seen.data()[k] != 0.0 && before.data()[k] != mine.data()[k]) {
            std::ostringstream msg;
            msg << "replicas of " << tensor << " disagree: device " << d << " has " << mine.data()[k]
                << " at local index " << k << " of its block " << b.text() << ", an earlier replica has "
                << before.data()[k];
            out.replicas_agree = false;
            out.disagreement = msg.str();
            break;
          }
        }
      }
      view = mine;
      std::fill(seen_view.begin(), seen_view.end(), 1.0);
    }
    out.tensor += term;
  }
  return out;
}

void copy_rows(const void* src, const Shape& src_shape, std::size_t src_begin, std::size_t len, void* dst,
               const Shape& dst_shape, std::size_t dst_begin, std::size_t dim, DType t) {
  Shape mid = src_shape;
  mid[dim] = len;
  std::vector<unsigned char> tmp(element_count(mid) * element_bytes(t));
  copy_out(src, t, src_shape, dim, src_begin, len, tmp.data(), t);
  copy_in(dst, t, dst_shape, dim, dst_begin, len, tmp.data(), t);
}

namespace {
void outer_inner(const Shape& shape, std::size_t dim, std::size_t& outer, std::size_t& inner) {
  outer = 1;
  inner = 1;
  for (std::size_t i = 0; i < dim; ++i) outer *= shape[i];
  for (std::size_t i = dim + 1; i < shape.size(); ++i) inner *= shape[i];
}
}  // namespace

void copy_out(const void* src, DType src_type, const Shape& shape, std::size_t dim, std::size_t begin,
              std::size_t len, void* dst, DType dst_type) {
  std::size_t outer, inner;
  outer_inner(shape, dim, outer, inner);
  const std::size_t sb = element_bytes(src_type), db = element_bytes(dst_type);
  auto s = static_cast<const unsigned char*>(src);
  auto d = static_cast<unsigned char*>(dst);
  for (std::size_t o = 0; o < outer; ++o)
    convert_elements(src_type, s + (o * shape[dim] + begin) * inner * sb, dst_type, d + o * len * inner * db,
                     len * inner);
}

void copy_in(void* dst, DType dst_type, const Shape& shape, std::size_t dim, std::size_t begin, std::size_t len,
             const void* src, DType src_type) {
  std::size_t outer, inner;
  outer_inner(shape, dim, outer, inner);
  const std::size_t sb = element_bytes(src_type), db = element_bytes(dst_type);
  auto s = static_cast<const unsigned char*>(src);
  auto d = static_cast<unsigned char*>(dst);
  for (std::size_t o = 0; o < outer; ++o)
    convert_elements(src_type, s + o * len * inner * sb, dst_type, d + (o * shape[dim] + begin) * inner * db,
                     len * inner);
}

}  // namespace shardlab
