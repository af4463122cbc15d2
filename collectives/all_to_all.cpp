// AllToAll by pairwise exchange: at step s (1..n-1) member r sends its slice for member r+s and
// receives member r-s's slice for r. Each member sends n-1 of its n slices, in the device's
// element type (packed into scratch space when they are not contiguous or the program holds
// another type).
#include <algorithm>
#include <vector>

#include "collectives/call.hpp"
#include "collectives/collectives.hpp"
#include "collectives/replay.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"

namespace shardlab {

template <class T>
xt::xarray<T> all_to_all(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                         std::size_t split_dim, std::size_t concat_dim, const std::string& tensor) {
  const Shape in_shape = shape_of(local);
  if (split_dim >= in_shape.size() || concat_dim >= in_shape.size())
    throw Error(ErrorKind::rank_mismatch, "all_to_all of " + tensor + " splits dim " + std::to_string(split_dim) +
                                              " and concatenates dim " + std::to_string(concat_dim) +
                                              ", but its local block " + shape_text(in_shape) + " has rank " +
                                              std::to_string(in_shape.size()));
  if (dev.replaying()) return replay_all_to_all(dev, local, axes, split_dim, concat_dim, {}, {}, tensor);
  Group g = dev.collective_group(axes);
  const int n = g.size();
  if (in_shape[split_dim] % n != 0)
    throw Error(ErrorKind::not_divisible, "all_to_all of " + tensor + ": dim " + std::to_string(split_dim) +
                                              " (size " + std::to_string(in_shape[split_dim]) +
                                              ") is not divisible by the group over " + axes_text(axes) + " (size " +
                                              std::to_string(n) + ")");
  const bool native = dev.native();
  const DType w = dev.dtype();
  const std::size_t eb = dev.element_bytes(), in_bytes = local.size() * eb;
  CallRecord rec(dev, g, "all_to_all", tensor, native ? "native" : "pairwise", in_bytes,
                 "all_to_all over " + axes_text(axes) + " of " + tensor + shape_text(in_shape) + " split dim " +
                     std::to_string(split_dim) + " concat dim " + std::to_string(concat_dim));
  const std::size_t b = in_shape[split_dim] / n, chunk = local.size() / n, cb = chunk * eb;
  Shape piece = in_shape;
  piece[split_dim] = b;
  Shape out_shape = piece;
  out_shape[concat_dim] *= n;
  xt::xarray<T> out = xt::empty<T>(out_shape);
  // Slices are sent straight from the input when they lie back to back in the wire type (every dim
  // before split_dim has size 1), and received straight into the result when its pieces do (every
  // dim before concat_dim); otherwise they go through scratch space.
  const bool same = dtype_of<T>() == w;
  const bool direct_send = same && outer_size(in_shape, split_dim) == 1;
  const bool direct_recv = same && outer_size(out_shape, concat_dim) == 1;
  const unsigned char* send = reinterpret_cast<const unsigned char*>(local.data());
  if (!direct_send) {
    unsigned char* packed = dev.scratch(0, in_bytes);
    for (int i = 0; i < n; ++i)
      copy_out(local.data(), dtype_of<T>(), in_shape, split_dim, i * b, b, packed + i * cb, w);
    send = packed;
  }
  unsigned char* recv = direct_recv ? reinterpret_cast<unsigned char*>(out.data()) : dev.scratch(1, in_bytes);
  const bool modeled = native && dev.transport().native_all_to_all(g, w, send, chunk, recv);
  if (!modeled) {
    std::copy(send + g.me * cb, send + (g.me + 1) * cb, recv + g.me * cb);
    for (int s = 1; s < n; ++s) {
      const int to = (g.me + s) % n, from = (g.me + n - s) % n;
      dev.transport().sendrecv(g, to, send + to * cb, cb, from, recv + from * cb, cb);
    }
    // --inject: its own block and the next's swapped, where they differ (padded blocks may be zeros)
    if (n > 1 && dev.fault().kind == FaultKind::swap_blocks &&
        !std::equal(recv + g.me * cb, recv + (g.me + 1) * cb, recv + (g.me + 1) % n * cb) &&
        dev.strike(FaultKind::swap_blocks))
      std::swap_ranges(recv + g.me * cb, recv + (g.me + 1) * cb, recv + (g.me + 1) % n * cb);
  }
  if (!direct_recv)
    for (int i = 0; i < n; ++i)
      copy_in(out.data(), dtype_of<T>(), out_shape, concat_dim, i * piece[concat_dim], piece[concat_dim],
              recv + i * cb, w);
  rec.done(out.size() * eb, modeled);
  return out;
}

// Uneven: member j's slice along split_dim has split_counts[j] rows; member i holds
// concat_counts[i] rows along concat_dim. Always packed through scratch space, always pairwise.
template <class T>
xt::xarray<T> all_to_all_v(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                           std::size_t split_dim, std::size_t concat_dim, const std::vector<std::size_t>& split_counts,
                           const std::vector<std::size_t>& concat_counts, const std::string& tensor) {
  const Shape in_shape = shape_of(local);
  if (split_dim >= in_shape.size() || concat_dim >= in_shape.size() || split_dim == concat_dim)
    throw Error(ErrorKind::rank_mismatch, "all_to_all_v of " + tensor + " splits dim " + std::to_string(split_dim) +
                                              " and concatenates dim " + std::to_string(concat_dim) + " of " +
                                              shape_text(in_shape) + "; they must be two different dims of it");
  if (dev.replaying())
    return replay_all_to_all(dev, local, axes, split_dim, concat_dim, split_counts, concat_counts, tensor);
  Group g = dev.collective_group(axes);
  const std::size_t n = static_cast<std::size_t>(g.size()), me = static_cast<std::size_t>(g.me);
  std::size_t split_total = 0, concat_total = 0;
  for (std::size_t c : split_counts) split_total += c;
  for (std::size_t c : concat_counts) concat_total += c;
  if (split_counts.size() != n || concat_counts.size() != n || split_total != in_shape[split_dim] ||
      concat_counts[me] != in_shape[concat_dim])
    throw Error(ErrorKind::rank_mismatch, "all_to_all_v of " + tensor + ": its block " + shape_text(in_shape) +
                                              " does not match the parts given for a group of " + std::to_string(n));
  const DType w = dev.dtype();
  const std::size_t eb = dev.element_bytes(), in_bytes = local.size() * eb;
  // Blocks differ between members in both dims: the signature names neither.
  Shape sig = in_shape;
  sig[split_dim] = split_total;
  sig[concat_dim] = concat_total;
  CallRecord rec(dev, g, "all_to_all", tensor, "pairwise", in_bytes,
                 "all_to_all over " + axes_text(axes) + " of " + tensor + shape_text(sig) + " split dim " +
                     std::to_string(split_dim) + " concat dim " + std::to_string(concat_dim) + ", uneven");
  std::size_t other = 1;  // elements per (split row, concat row) pair
  for (std::size_t d = 0; d < in_shape.size(); ++d)
    if (d != split_dim && d != concat_dim) other *= in_shape[d];
  const std::size_t mine = split_counts[me];
  Shape out_shape = in_shape;
  out_shape[split_dim] = mine;
  out_shape[concat_dim] = concat_total;
  // Send part j: split_counts[j] rows of this block; receive from i: mine x concat_counts[i].
  std::vector<std::size_t> soff(n + 1, 0), roff(n + 1, 0), parts(n);
  for (std::size_t j = 0; j < n; ++j) {
    soff[j + 1] = soff[j] + split_counts[j] * in_shape[concat_dim] * other;
    roff[j + 1] = roff[j] + mine * concat_counts[j] * other;
    parts[j] = (soff[j + 1] - soff[j]) * eb;
  }
  rec.parts(parts, g.me);
  unsigned char* send = dev.scratch(0, soff[n] * eb);
  unsigned char* recv = dev.scratch(1, roff[n] * eb);
  std::size_t row = 0;
  for (std::size_t j = 0; j < n; ++j) {
    copy_out(local.data(), dtype_of<T>(), in_shape, split_dim, row, split_counts[j], send + soff[j] * eb, w);
    row += split_counts[j];
  }
  std::copy(send + soff[me] * eb, send + soff[me + 1] * eb, recv + roff[me] * eb);
  for (std::size_t s = 1; s < n; ++s) {
    const std::size_t to = (me + s) % n, from = (me + n - s) % n;
    dev.transport().sendrecv(g, static_cast<int>(to), send + soff[to] * eb, parts[to], static_cast<int>(from),
                             recv + roff[from] * eb, (roff[from + 1] - roff[from]) * eb);
  }
  const std::size_t next = (me + 1) % n;  // --inject swap-blocks, where the two parts are the same size and differ
  if (n > 1 && roff[me + 1] - roff[me] == roff[next + 1] - roff[next] && dev.fault().kind == FaultKind::swap_blocks &&
      !std::equal(recv + roff[me] * eb, recv + roff[me + 1] * eb, recv + roff[next] * eb) &&
      dev.strike(FaultKind::swap_blocks))
    std::swap_ranges(recv + roff[me] * eb, recv + roff[me + 1] * eb, recv + roff[next] * eb);
  xt::xarray<T> out = xt::empty<T>(out_shape);
  row = 0;
  for (std::size_t i = 0; i < n; ++i) {
    copy_in(out.data(), dtype_of<T>(), out_shape, concat_dim, row, concat_counts[i], recv + roff[i] * eb, w);
    row += concat_counts[i];
  }
  rec.done(out.size() * eb);
  return out;
}

#define SHARDLAB_ALL_TO_ALL_V(T)                                                                                \
  template xt::xarray<T> all_to_all_v<T>(Device&, const xt::xarray<T>&, const std::vector<std::string>&,      \
                                         std::size_t, std::size_t, const std::vector<std::size_t>&,            \
                                         const std::vector<std::size_t>&, const std::string&);
SHARDLAB_ALL_TO_ALL_V(double)
SHARDLAB_ALL_TO_ALL_V(float)
SHARDLAB_ALL_TO_ALL_V(bfloat16)
#undef SHARDLAB_ALL_TO_ALL_V

template xt::xarray<double> all_to_all<double>(Device&, const xt::xarray<double>&, const std::vector<std::string>&,
                                               std::size_t, std::size_t, const std::string&);
template xt::xarray<float> all_to_all<float>(Device&, const xt::xarray<float>&, const std::vector<std::string>&,
                                             std::size_t, std::size_t, const std::string&);
template xt::xarray<bfloat16> all_to_all<bfloat16>(Device&, const xt::xarray<bfloat16>&,
                                                   const std::vector<std::string>&, std::size_t, std::size_t,
                                                   const std::string&);

}  // namespace shardlab
