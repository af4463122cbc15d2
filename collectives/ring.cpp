// Ring AllGather, ring ReduceScatter and AllReduce = ReduceScatter + AllGather.
// All three run on a flat buffer of the device's element type cut into n chunks. When the program
// holds the wire type and the chunks are contiguous, the ring reads the input and writes the
// result in place; otherwise the local block is packed into the device's scratch space (converted
// to the wire type, e.g. float64 lesson blocks moved as bfloat16), moved, and unpacked.
#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/call.hpp"
#include "collectives/collectives.hpp"
#include "collectives/replay.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"

namespace shardlab {

namespace {

// Chunk i of a flat buffer: [offset[i], offset[i+1]) elements.
std::vector<std::size_t> chunk_offsets(std::size_t elements, int n) {
  std::vector<std::size_t> off(n + 1, 0);
  for (int i = 0; i < n; ++i) off[i + 1] = off[i] + elements / n + (static_cast<std::size_t>(i) < elements % n ? 1 : 0);
  return off;
}

int mod(int a, int n) { return ((a % n) + n) % n; }

// After n-1 steps member r holds the sum over the group of chunk r, written to `last`. At step s it
// sends its partial sum of chunk r-s-1 (at step 0 just its input) to the next member, and writes
// its input's chunk r-s-2 plus what the previous member sent into acc (the last step: into
// `last`). Every chunk is received once, so the input is read in place and acc may be the input.
void ring_reduce_scatter(Device& dev, const Group& g, const unsigned char* in, unsigned char* acc,
                         const std::vector<std::size_t>& off, unsigned char* last, Reduce op = Reduce::sum) {
  const int n = g.size(), r = g.me;
  const std::size_t eb = dev.element_bytes();
  if (n == 1 && last != in) std::memcpy(last, in, (off[1] - off[0]) * eb);
  for (int s = 0; s < n - 1; ++s) {
    const int send = mod(r - s - 1, n), recv = mod(r - s - 2, n);
    const unsigned char* from = (s == 0 ? in : acc) + off[send] * eb;
    unsigned char* to = s == n - 2 ? last : acc + off[recv] * eb;
    // --inject skip-add: keep what came and add nothing of ours, at the first step where ours is
    // not all zeros (skipping a zero would change nothing).
    const std::size_t own = (off[recv + 1] - off[recv]) * eb;
    const unsigned char* mine = in + off[recv] * eb;
    if (op == Reduce::sum && dev.fault().kind == FaultKind::skip_add &&
        std::any_of(mine, mine + own, [](unsigned char b) { return b != 0; }) && dev.strike(FaultKind::skip_add)) {
      dev.transport().sendrecv(g, g.next(), from, (off[send + 1] - off[send]) * eb, g.prev(), to, own);
      continue;
    }
    dev.transport().sendrecv_add(g, g.next(), from, off[send + 1] - off[send], g.prev(), mine, to,
                                 off[recv + 1] - off[recv], dev.dtype(), op);
  }
}

// Member r starts with chunk r (in buf, or at `own` when given: then chunk r of buf is neither read
// nor written); at step s it passes chunk r-s on and receives r-s-1.
void ring_all_gather(Device& dev, const Group& g, unsigned char* buf, const std::vector<std::size_t>& off,
                     const unsigned char* own = nullptr) {
  const int n = g.size(), r = g.me;
  const std::size_t eb = dev.element_bytes();
  for (int s = 0; s < n - 1; ++s) {
    const int send = mod(r - s, n), recv = mod(r - s - 1, n);
    const unsigned char* from = s == 0 && own ? own : buf + off[send] * eb;
    dev.transport().sendrecv(g, g.next(), from, (off[send + 1] - off[send]) * eb, g.prev(),
                             buf + off[recv] * eb, (off[recv + 1] - off[recv]) * eb);
    // --inject: the previous step's block again (where that changes something: uneven blocks may
    // be empty, and padded ones all zeros)
    const int before = mod(r - s, n);
    const std::size_t stale = std::min(off[recv + 1] - off[recv], off[before + 1] - off[before]) * eb;
    if (s > 0 && dev.fault().kind == FaultKind::stale_receive &&
        std::memcmp(buf + off[recv] * eb, buf + off[before] * eb, stale) != 0 && dev.strike(FaultKind::stale_receive))
      std::memcpy(buf + off[recv] * eb, buf + off[before] * eb, stale);
  }
}

// --inject gather-offset: chunks 0 and 1 of a gathered buffer trade places (as if each block had
// landed at the other's offset).
void misplace_blocks(Device& dev, unsigned char* buf, const std::vector<std::size_t>& off) {
  const std::size_t eb = dev.element_bytes();
  if (off.size() < 3 || off[1] - off[0] != off[2] - off[1] || dev.fault().kind != FaultKind::gather_offset ||
      std::memcmp(buf + off[0] * eb, buf + off[1] * eb, (off[1] - off[0]) * eb) == 0 ||  // a swap that changes nothing
      !dev.strike(FaultKind::gather_offset))
    return;
  std::swap_ranges(buf + off[0] * eb, buf + off[1] * eb, buf + off[1] * eb);
}

template <class T>
std::string describe(const std::string& op, const std::vector<std::string>& axes, const std::string& tensor,
                     const xt::xarray<T>& local, const std::string& extra) {
  return op + " over " + (axes.empty() ? std::string("no axes") : axes_text(axes)) + " of " + tensor +
         shape_text(shape_of(local)) + extra;
}

// Uneven parts: offsets in elements of parts of counts[i] rows of `rest` elements each.
std::vector<std::size_t> count_offsets(const std::vector<std::size_t>& counts, std::size_t rest) {
  std::vector<std::size_t> off(counts.size() + 1, 0);
  for (std::size_t i = 0; i < counts.size(); ++i) off[i + 1] = off[i] + counts[i] * rest;
  return off;
}

std::size_t rows_total(const std::vector<std::size_t>& counts) {
  std::size_t t = 0;
  for (std::size_t c : counts) t += c;
  return t;
}

// Elements of a row: the product of every dim but `dim` (right even when the dim is empty).
std::size_t row_elements(const Shape& shape, std::size_t dim) {
  std::size_t r = 1;
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (d != dim) r *= shape[d];
  return r;
}

std::string counts_text(const std::vector<std::size_t>& counts) {
  std::string out;
  for (std::size_t c : counts) out += (out.empty() ? "" : ",") + std::to_string(c);
  return out;
}

// counts[me] must be `mine` (all_gather: the rows this device holds), or their sum must
// (reduce_scatter: the rows it splits).
void check_counts(const std::vector<std::size_t>& counts, int n, std::size_t mine, int me, bool whole,
                  const std::string& op, const std::string& tensor) {
  if (counts.size() != static_cast<std::size_t>(n) ||
      (whole ? rows_total(counts) : counts[static_cast<std::size_t>(me)]) != mine)
    throw Error(ErrorKind::rank_mismatch, op + " of " + tensor + " with blocks of " + counts_text(counts) +
                                              " rows over a group of " + std::to_string(n) + ", but this device holds " +
                                              std::to_string(mine) + " rows");
}

template <class T>
void check_dim(const xt::xarray<T>& local, std::size_t dim, const std::string& op, const std::string& tensor) {
  if (dim >= local.dimension())
    throw Error(ErrorKind::rank_mismatch, op + " of " + tensor + " along dim " + std::to_string(dim) +
                                              ", but its local block " + shape_text(shape_of(local)) + " has rank " +
                                              std::to_string(local.dimension()));
}

}  // namespace

namespace {

// AllGather of blocks of counts[i] rows along dim (empty counts: every block as this device's).
template <class T>
xt::xarray<T> gather_parts(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                           std::size_t dim, const std::vector<std::size_t>& counts, const std::string& tensor) {
  check_dim(local, dim, "all_gather", tensor);
  if (dev.replaying()) return replay_all_gather(dev, local, axes, dim, counts, tensor);
  Group g = dev.collective_group(axes);
  const int n = g.size();
  const bool uneven = !counts.empty();
  const Shape in_shape = shape_of(local);
  if (uneven) check_counts(counts, n, in_shape[dim], g.me, false, "all_gather", tensor);
  const bool native = dev.native() && !uneven;  // uneven blocks always go round the ring
  const DType w = dev.dtype();
  const std::size_t eb = dev.element_bytes(), in_bytes = local.size() * eb;
  Shape out_shape = in_shape;
  out_shape[dim] = uneven ? rows_total(counts) : in_shape[dim] * n;
  const std::size_t rest = row_elements(in_shape, dim);
  // Uneven blocks differ in shape between members: the signature names the gathered shape.
  CallRecord rec(dev, g, "all_gather", tensor, native ? "native" : "ring", in_bytes,
                 uneven ? "all_gather over " + axes_text(axes) + " of " + tensor + shape_text(out_shape) +
                              " along dim " + std::to_string(dim) + " in blocks of " + counts_text(counts)
                        : describe("all_gather", axes, tensor, local, " along dim " + std::to_string(dim)));
  // staging holds the n blocks back to back: [n][block], in the wire type. When that is already
  // the result's layout (every dim before `dim` has size 1) and type, the ring fills the result.
  const std::size_t total = uneven ? out_shape[dim] * rest : local.size() * n;
  xt::xarray<T> out = xt::empty<T>(out_shape);
  const bool in_place = outer_size(in_shape, dim) == 1 && dtype_of<T>() == w;
  unsigned char* staging = in_place ? reinterpret_cast<unsigned char*>(out.data()) : dev.scratch(0, total * eb);
  const auto off = uneven ? count_offsets(counts, rest) : chunk_offsets(total, n);
  if (uneven) {
    std::vector<std::size_t> parts;
    for (std::size_t c : counts) parts.push_back(c * rest * eb);
    rec.parts(parts, g.me);
  }
  bool modeled = false;
  if (native) {  // MPICH's all_gather reads the block from a buffer of its own
    unsigned char* in = dev.scratch(1, in_bytes);
    convert_elements(dtype_of<T>(), local.data(), w, in, local.size());
    modeled = dev.transport().native_all_gather(g, w, in, local.size(), staging);
  }
  if (!modeled && in_place) {  // the ring sends the block from the input; it is copied in afterwards
    ring_all_gather(dev, g, staging, off, reinterpret_cast<const unsigned char*>(local.data()));
    convert_elements(w, local.data(), w, staging + off[g.me] * eb, local.size());
  } else if (!modeled) {
    convert_elements(dtype_of<T>(), local.data(), w, staging + off[g.me] * eb, local.size());
    ring_all_gather(dev, g, staging, off);
  }
  misplace_blocks(dev, staging, off);
  if (!in_place)
    for (int i = 0; i < n; ++i)
      copy_in(out.data(), dtype_of<T>(), out_shape, dim, rest ? off[i] / rest : 0, rest ? (off[i + 1] - off[i]) / rest : 0,
              staging + off[i] * eb, w);
  rec.done(out.size() * eb, modeled);
  return out;
}

}  // namespace

template <class T>
xt::xarray<T> all_gather(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                         std::size_t dim, const std::string& tensor) {
  return gather_parts(dev, local, axes, dim, {}, tensor);
}

template <class T>
xt::xarray<T> all_gather_v(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                           std::size_t dim, const std::vector<std::size_t>& counts, const std::string& tensor) {
  return gather_parts(dev, local, axes, dim, counts, tensor);
}

namespace {

// ReduceScatter into slices of counts[i] rows along dim (empty counts: n equal slices).
template <class T>
xt::xarray<T> scatter_parts(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                            std::size_t dim, const std::vector<std::size_t>& counts, const std::string& tensor) {
  check_dim(local, dim, "reduce_scatter", tensor);
  if (dev.replaying()) return replay_reduce_scatter(dev, local, axes, dim, counts, tensor);
  Group g = dev.collective_group(axes);
  const int n = g.size();
  const Shape in_shape = shape_of(local);
  const bool uneven = !counts.empty();
  if (uneven) check_counts(counts, n, in_shape[dim], g.me, true, "reduce_scatter", tensor);
  if (!uneven && in_shape[dim] % n != 0)
    throw Error(ErrorKind::not_divisible, "reduce_scatter of " + tensor + ": dim " + std::to_string(dim) + " (size " +
                                              std::to_string(in_shape[dim]) + ") is not divisible by the group over " +
                                              axes_text(axes) + " (size " + std::to_string(n) + ")");
  const bool native = dev.native() && !uneven;
  const DType w = dev.dtype();
  const std::size_t eb = dev.element_bytes(), in_bytes = local.size() * eb;
  CallRecord rec(dev, g, "reduce_scatter", tensor, native ? "native" : "ring", in_bytes,
                 describe("reduce_scatter", axes, tensor, local,
                          " along dim " + std::to_string(dim) + (uneven ? " into " + counts_text(counts) : "")));
  const std::size_t rest = row_elements(in_shape, dim);
  const std::size_t b = uneven ? counts[static_cast<std::size_t>(g.me)] : in_shape[dim] / n;
  Shape out_shape = in_shape;
  out_shape[dim] = b;
  xt::xarray<T> out = xt::empty<T>(out_shape);
  const auto off = uneven ? count_offsets(counts, rest) : chunk_offsets(local.size(), n);
  if (uneven) {
    std::vector<std::size_t> parts;
    for (std::size_t c : counts) parts.push_back(c * rest * eb);
    rec.parts(parts, g.me);
  }
  // The n blocks along dim are the ring's chunks. When they already lie back to back in the wire
  // type (every dim before `dim` has size 1), the ring reads the input in place and writes the
  // result; otherwise they are packed into scratch space first.
  const bool direct = dtype_of<T>() == w && outer_size(in_shape, dim) == 1;
  unsigned char* acc = dev.scratch(0, local.size() * eb);
  const unsigned char* in = acc;
  if (direct)
    in = reinterpret_cast<const unsigned char*>(local.data());
  else
    for (int i = 0; i < n; ++i)
      copy_out(local.data(), dtype_of<T>(), in_shape, dim, uneven ? (rest ? off[i] / rest : 0) : i * b,
               uneven ? counts[static_cast<std::size_t>(i)] : b, acc + off[i] * eb, w);
  unsigned char* mine = direct ? reinterpret_cast<unsigned char*>(out.data()) : acc + off[g.me] * eb;
  bool modeled = false;
  if (native) {
    unsigned char* result = dev.scratch(1, out.size() * eb);
    modeled = dev.transport().native_reduce_scatter(g, w, in, out.size(), result);
    if (modeled) convert_elements(w, result, dtype_of<T>(), out.data(), out.size());
  }
  if (!modeled) {
    ring_reduce_scatter(dev, g, in, acc, off, mine);
    if (!direct) convert_elements(w, mine, dtype_of<T>(), out.data(), out.size());
  }
  rec.done(out.size() * eb, modeled);
  return out;
}

}  // namespace

template <class T>
xt::xarray<T> reduce_scatter(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                             std::size_t dim, const std::string& tensor) {
  return scatter_parts(dev, local, axes, dim, {}, tensor);
}

template <class T>
xt::xarray<T> reduce_scatter_v(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                               std::size_t dim, const std::vector<std::size_t>& counts, const std::string& tensor) {
  return scatter_parts(dev, local, axes, dim, counts, tensor);
}

namespace {

template <class T>
xt::xarray<T> all_reduce_as(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                            const std::string& tensor, Reduce op) {
  if (dev.replaying()) return replay_all_reduce(dev, local, axes, op, tensor);
  Group g = dev.collective_group(axes);
  const int n = g.size();
  const bool native = dev.native();
  const DType w = dev.dtype();
  const std::size_t eb = dev.element_bytes(), in_bytes = local.size() * eb;
  const std::string name = op == Reduce::max ? "all_reduce_max" : "all_reduce";
  CallRecord rec(dev, g, name, tensor, native ? "native" : "ring", in_bytes, describe(name, axes, tensor, local, ""));
  xt::xarray<T> out = xt::empty<T>(local.shape());
  // When the program holds the wire type the ring reads the input in place and builds the sum in
  // the result; otherwise both happen in scratch space in the wire type.
  const bool direct = dtype_of<T>() == w;
  unsigned char* buf = direct ? reinterpret_cast<unsigned char*>(out.data()) : dev.scratch(0, in_bytes);
  const unsigned char* in = buf;
  if (direct)
    in = reinterpret_cast<const unsigned char*>(local.data());
  else
    convert_elements(dtype_of<T>(), local.data(), w, buf, local.size());
  bool modeled = false;
  if (native) {  // MPICH's works in place
    if (in != buf) std::memcpy(buf, in, in_bytes);
    in = buf;
    modeled = dev.transport().native_all_reduce(g, w, buf, local.size(), op);
  }
  if (!modeled) {
    const auto off = chunk_offsets(local.size(), n);
    ring_reduce_scatter(dev, g, in, buf, off, buf + off[g.me] * eb, op);
    ring_all_gather(dev, g, buf, off);
    misplace_blocks(dev, buf, off);
  }
  if (!direct) convert_elements(w, buf, dtype_of<T>(), out.data(), out.size());
  rec.done(out.size() * eb, modeled);
  return out;
}

}  // namespace

template <class T>
xt::xarray<T> all_reduce(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                         const std::string& tensor) {
  return all_reduce_as(dev, local, axes, tensor, Reduce::sum);
}

template <class T>
xt::xarray<T> all_reduce_max(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                             const std::string& tensor) {
  return all_reduce_as(dev, local, axes, tensor, Reduce::max);
}

#define SHARDLAB_RING(T)                                                                                         \
  template xt::xarray<T> all_gather<T>(Device&, const xt::xarray<T>&, const std::vector<std::string>&,         \
                                       std::size_t, const std::string&);                                        \
  template xt::xarray<T> reduce_scatter<T>(Device&, const xt::xarray<T>&, const std::vector<std::string>&,     \
                                           std::size_t, const std::string&);                                    \
  template xt::xarray<T> all_gather_v<T>(Device&, const xt::xarray<T>&, const std::vector<std::string>&,       \
                                         std::size_t, const std::vector<std::size_t>&, const std::string&);     \
  template xt::xarray<T> reduce_scatter_v<T>(Device&, const xt::xarray<T>&, const std::vector<std::string>&,   \
                                             std::size_t, const std::vector<std::size_t>&, const std::string&); \
  template xt::xarray<T> all_reduce<T>(Device&, const xt::xarray<T>&, const std::vector<std::string>&,         \
                                       const std::string&);                                                     \
  template xt::xarray<T> all_reduce_max<T>(Device&, const xt::xarray<T>&, const std::vector<std::string>&,     \
                                           const std::string&);
SHARDLAB_RING(double)
SHARDLAB_RING(float)
SHARDLAB_RING(bfloat16)
#undef SHARDLAB_RING

}  // namespace shardlab
