#include "collectives/replay.hpp"

#include <cstring>
#include <utility>

#include "core/layout.hpp"
#include "core/mesh.hpp"

namespace shardlab {

namespace {

// Rows [start, start + rows) of x along dim, as a view.
template <class X>
auto rows_of(X& x, std::size_t dim, std::size_t start, std::size_t rows) {
  xt::xstrided_slice_vector sv(x.dimension(), xt::all());
  sv[dim] = xt::range(start, start + rows);
  return xt::strided_view(x, sv);
}

// Every member's block, in group order: this device's own, and the others' by plain exchanges
// (at step s: to me+s, from me-s). shapes[m]: member m's block shape.
template <class T>
std::vector<xt::xarray<T>> everyones(Device& dev, const Group& g, const xt::xarray<T>& local,
                                     const std::vector<Shape>& shapes, const std::string& what) {
  const int n = g.size();
  std::vector<xt::xarray<T>> all(static_cast<std::size_t>(n));
  all[static_cast<std::size_t>(g.me)] = local;
  dev.transport().set_activity("replay of " + what);
  for (int s = 1; s < n; ++s) {
    const int to = (g.me + s) % n, from = (g.me + n - s) % n;
    xt::xarray<T>& in = all[static_cast<std::size_t>(from)];
    in = xt::empty<T>(shapes[static_cast<std::size_t>(from)]);
    dev.transport().sendrecv(g, to, local.data(), local.size() * sizeof(T), from, in.data(), in.size() * sizeof(T));
  }
  return all;
}

// x as the wire type w stores it, in bytes.
template <class T>
std::vector<unsigned char> to_wire(const xt::xarray<T>& x, DType w) {
  std::vector<unsigned char> out(x.size() * element_bytes(w));
  convert_elements(dtype_of<T>(), x.data(), w, out.data(), x.size());
  return out;
}

// x rounded through the wire type (T -> w -> T), as the collectives move it.
template <class T>
xt::xarray<T> through_wire(const xt::xarray<T>& x, DType w) {
  const std::vector<unsigned char> wire = to_wire(x, w);
  xt::xarray<T> out = xt::empty<T>(x.shape());
  convert_elements(w, wire.data(), dtype_of<T>(), out.data(), x.size());
  return out;
}

// The sum (or max) of parts[first], parts[first+1], ... (n of them, cyclically), each `count`
// elements of w from element `at`, one rounded combine at a time, into out.
void fold(DType w, Reduce op, const std::vector<std::vector<unsigned char>>& parts, int first, std::size_t at,
          std::size_t count, unsigned char* out) {
  const int n = static_cast<int>(parts.size());
  const std::size_t eb = element_bytes(w);
  if (count == 0) return;
  std::memcpy(out, parts[static_cast<std::size_t>(first % n)].data() + at * eb, count * eb);
  for (int k = 1; k < n; ++k)
    combine_elements(w, op, out, parts[static_cast<std::size_t>((first + k) % n)].data() + at * eb, out, count);
}

// Where member `me`'s slice of a dim of `total` rows starts, and its rows: n equal slices, or
// counts[m] rows for member m when counts are given.
std::pair<std::size_t, std::size_t> slice_of(std::size_t total, const std::vector<std::size_t>& counts, std::size_t n,
                                             std::size_t me) {
  if (counts.empty()) return {me * (total / n), total / n};
  std::size_t start = 0;
  for (std::size_t m = 0; m < me; ++m) start += counts[m];
  return {start, counts[me]};
}

}  // namespace

template <class T>
xt::xarray<T> replay_all_gather(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                                std::size_t dim, const std::vector<std::size_t>& counts, const std::string& tensor) {
  const Group g = dev.group(axes);
  const std::size_t n = static_cast<std::size_t>(g.size());
  std::vector<Shape> shapes(n, shape_of(local));
  Shape out_shape = shape_of(local);
  out_shape[dim] = 0;
  for (std::size_t m = 0; m < n; ++m) {
    if (!counts.empty()) shapes[m][dim] = counts[m];
    out_shape[dim] += shapes[m][dim];
  }
  const auto all = everyones(dev, g, local, shapes, "all_gather of " + tensor + " over " + axes_text(axes));
  xt::xarray<T> out = xt::empty<T>(out_shape);
  std::size_t row = 0;
  for (std::size_t m = 0; m < n; ++m) {
    rows_of(out, dim, row, shapes[m][dim]) = through_wire(all[m], dev.dtype());
    row += shapes[m][dim];
  }
  return out;
}

template <class T>
xt::xarray<T> replay_reduce_scatter(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                                    std::size_t dim, const std::vector<std::size_t>& counts,
                                    const std::string& tensor) {
  const Group g = dev.group(axes);
  const std::size_t n = static_cast<std::size_t>(g.size()), me = static_cast<std::size_t>(g.me);
  const Shape in_shape = shape_of(local);
  const auto [start, rows] = slice_of(in_shape[dim], counts, n, me);
  const auto all = everyones(dev, g, local, std::vector<Shape>(n, in_shape),
                             "reduce_scatter of " + tensor + " over " + axes_text(axes));
  const DType w = dev.dtype();
  std::vector<std::vector<unsigned char>> slices;
  for (const auto& x : all) slices.push_back(to_wire(xt::xarray<T>(rows_of(x, dim, start, rows)), w));
  Shape out_shape = in_shape;
  out_shape[dim] = rows;
  xt::xarray<T> out = xt::empty<T>(out_shape);
  std::vector<unsigned char> sum(out.size() * element_bytes(w));
  fold(w, Reduce::sum, slices, static_cast<int>(me) + 1, 0, out.size(), sum.data());
  convert_elements(w, sum.data(), dtype_of<T>(), out.data(), out.size());
  return out;
}

template <class T>
xt::xarray<T> replay_all_reduce(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                                Reduce op, const std::string& tensor) {
  const Group g = dev.group(axes);
  const std::size_t n = static_cast<std::size_t>(g.size());
  const auto all = everyones(dev, g, local, std::vector<Shape>(n, shape_of(local)),
                             std::string(op == Reduce::max ? "all_reduce_max" : "all_reduce") + " of " + tensor +
                                 " over " + axes_text(axes));
  const DType w = dev.dtype();
  std::vector<std::vector<unsigned char>> blocks;
  for (const auto& x : all) blocks.push_back(to_wire(x, w));
  std::vector<unsigned char> sum(local.size() * element_bytes(w));
  const std::size_t size = local.size(), each = size / n, longer = size % n;
  for (std::size_t c = 0, at = 0; c < n; ++c) {
    const std::size_t count = each + (c < longer ? 1 : 0);
    fold(w, op, blocks, static_cast<int>(c) + 1, at, count, sum.data() + at * element_bytes(w));
    at += count;
  }
  xt::xarray<T> out = xt::empty<T>(local.shape());
  convert_elements(w, sum.data(), dtype_of<T>(), out.data(), out.size());
  return out;
}

template <class T>
xt::xarray<T> replay_all_to_all(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                                std::size_t split_dim, std::size_t concat_dim,
                                const std::vector<std::size_t>& split_counts,
                                const std::vector<std::size_t>& concat_counts, const std::string& tensor) {
  const Group g = dev.group(axes);
  const std::size_t n = static_cast<std::size_t>(g.size()), me = static_cast<std::size_t>(g.me);
  const Shape in_shape = shape_of(local);
  std::vector<Shape> shapes(n, in_shape);
  if (!concat_counts.empty())
    for (std::size_t m = 0; m < n; ++m) shapes[m][concat_dim] = concat_counts[m];
  const auto [start, rows] = slice_of(in_shape[split_dim], split_counts, n, me);
  const auto all = everyones(dev, g, local, shapes, "all_to_all of " + tensor + " over " + axes_text(axes));
  // Member m's slice for this device, then the slices end to end along concat_dim (which may be
  // split_dim itself).
  std::vector<xt::xarray<T>> slices;
  Shape out_shape = in_shape;
  out_shape[split_dim] = rows;
  out_shape[concat_dim] = 0;
  for (std::size_t m = 0; m < n; ++m) {
    slices.push_back(through_wire(xt::xarray<T>(rows_of(all[m], split_dim, start, rows)), dev.dtype()));
    out_shape[concat_dim] += slices.back().shape()[concat_dim];
  }
  xt::xarray<T> out = xt::empty<T>(out_shape);
  std::size_t row = 0;
  for (const auto& slice : slices) {
    rows_of(out, concat_dim, row, slice.shape()[concat_dim]) = slice;
    row += slice.shape()[concat_dim];
  }
  return out;
}

#define SHARDLAB_REPLAY(T)                                                                                        \
  template xt::xarray<T> replay_all_gather<T>(Device&, const xt::xarray<T>&, const std::vector<std::string>&,   \
                                              std::size_t, const std::vector<std::size_t>&, const std::string&); \
  template xt::xarray<T> replay_reduce_scatter<T>(Device&, const xt::xarray<T>&, const std::vector<std::string>&, \
                                                  std::size_t, const std::vector<std::size_t>&,                   \
                                                  const std::string&);                                           \
  template xt::xarray<T> replay_all_reduce<T>(Device&, const xt::xarray<T>&, const std::vector<std::string>&,   \
                                              Reduce, const std::string&);                                       \
  template xt::xarray<T> replay_all_to_all<T>(Device&, const xt::xarray<T>&, const std::vector<std::string>&,   \
                                              std::size_t, std::size_t, const std::vector<std::size_t>&,         \
                                              const std::vector<std::size_t>&, const std::string&);
SHARDLAB_REPLAY(double)
SHARDLAB_REPLAY(float)
SHARDLAB_REPLAY(bfloat16)
#undef SHARDLAB_REPLAY

}  // namespace shardlab
