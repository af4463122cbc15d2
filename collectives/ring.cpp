// Ring AllGather, ring ReduceScatter and AllReduce = ReduceScatter + AllGather.
// All three run on a flat buffer cut into n chunks; for a tensor dim other than 0 the chunks are
// first packed contiguously (copy_out) and unpacked afterwards (copy_in).
#include <vector>

#include "collectives/call.hpp"
#include "collectives/collectives.hpp"
#include "collectives/predict.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"

namespace shardlab {

namespace {

// Chunk i of a flat buffer: [offset[i], offset[i+1]).
std::vector<std::size_t> chunk_offsets(std::size_t elements, int n) {
  std::vector<std::size_t> off(n + 1, 0);
  for (int i = 0; i < n; ++i) off[i + 1] = off[i] + elements / n + (static_cast<std::size_t>(i) < elements % n ? 1 : 0);
  return off;
}

int mod(int a, int n) { return ((a % n) + n) % n; }

// After n-1 steps member r holds the sum over the group of chunk r. At step s it sends its partial
// sum of chunk r-s-1 to the next member and adds the previous member's chunk r-s-2 into its own.
void ring_reduce_scatter(Device& dev, const Group& g, double* buf, const std::vector<std::size_t>& off) {
  const int n = g.size(), r = g.me;
  for (int s = 0; s < n - 1; ++s) {
    const int send = mod(r - s - 1, n), recv = mod(r - s - 2, n);
    dev.transport().sendrecv_add(g, g.next(), buf + off[send], off[send + 1] - off[send], g.prev(), buf + off[recv],
                                 off[recv + 1] - off[recv]);
  }
}

// Member r starts with chunk r in place; at step s it passes chunk r-s on and receives r-s-1.
void ring_all_gather(Device& dev, const Group& g, double* buf, const std::vector<std::size_t>& off) {
  const int n = g.size(), r = g.me;
  for (int s = 0; s < n - 1; ++s) {
    const int send = mod(r - s, n), recv = mod(r - s - 1, n);
    dev.transport().sendrecv(g, g.next(), buf + off[send], (off[send + 1] - off[send]) * sizeof(double), g.prev(),
                             buf + off[recv], (off[recv + 1] - off[recv]) * sizeof(double));
  }
}

std::string describe(const std::string& op, const std::vector<std::string>& axes, const std::string& tensor,
                     const Tensor& local, const std::string& extra) {
  return op + " over " + (axes.empty() ? std::string("no axes") : axes_text(axes)) + " of " + tensor +
         shape_text(shape_of(local)) + extra;
}

void check_dim(const Tensor& local, std::size_t dim, const std::string& op, const std::string& tensor) {
  if (dim >= local.dimension())
    throw Error(ErrorKind::rank_mismatch, op + " of " + tensor + " along dim " + std::to_string(dim) +
                                              ", but its local block " + shape_text(shape_of(local)) + " has rank " +
                                              std::to_string(local.dimension()));
}

}  // namespace

Tensor all_gather(Device& dev, const Tensor& local, const std::vector<std::string>& axes, std::size_t dim,
                  const std::string& tensor) {
  check_dim(local, dim, "all_gather", tensor);
  Group g = dev.group(axes);
  const int n = g.size();
  const bool native = dev.native();
  CallRecord rec(dev, g, "all_gather", tensor, native ? "native" : "ring", local.size() * sizeof(double),
                 describe("all_gather", axes, tensor, local, " along dim " + std::to_string(dim)));
  const Shape in_shape = shape_of(local);
  Shape out_shape = in_shape;
  out_shape[dim] *= n;
  // staging holds the n blocks back to back: [n][block]
  std::vector<double> staging(local.size() * n);
  const auto off = chunk_offsets(staging.size(), n);
  std::copy(local.begin(), local.end(), staging.begin() + off[g.me]);
  bool modeled = native && dev.transport().native_all_gather(g, local.data(), local.size(), staging.data());
  if (!modeled) ring_all_gather(dev, g, staging.data(), off);
  Tensor out = xt::zeros<double>(out_shape);
  for (int i = 0; i < n; ++i)
    copy_in(out.data(), out_shape, dim, i * in_shape[dim], in_shape[dim], staging.data() + off[i]);
  if (modeled) {
    const std::size_t b = predicted_bytes_sent("all_gather", n, local.size() * sizeof(double));
    rec.done_modeled(out.size() * sizeof(double), b, b, predicted_messages("all_gather", n));
  } else {
    rec.done(out.size() * sizeof(double));
  }
  return out;
}

Tensor reduce_scatter(Device& dev, const Tensor& local, const std::vector<std::string>& axes, std::size_t dim,
                      const std::string& tensor) {
  check_dim(local, dim, "reduce_scatter", tensor);
  Group g = dev.group(axes);
  const int n = g.size();
  const Shape in_shape = shape_of(local);
  if (in_shape[dim] % n != 0)
    throw Error(ErrorKind::not_divisible, "reduce_scatter of " + tensor + ": dim " + std::to_string(dim) + " (size " +
                                              std::to_string(in_shape[dim]) + ") is not divisible by the group over " +
                                              axes_text(axes) + " (size " + std::to_string(n) + ")");
  const bool native = dev.native();
  CallRecord rec(dev, g, "reduce_scatter", tensor, native ? "native" : "ring", local.size() * sizeof(double),
                 describe("reduce_scatter", axes, tensor, local, " along dim " + std::to_string(dim)));
  const std::size_t b = in_shape[dim] / n;
  std::vector<double> staging(local.size());
  const auto off = chunk_offsets(staging.size(), n);
  for (int i = 0; i < n; ++i) copy_out(local.data(), in_shape, dim, i * b, b, staging.data() + off[i]);
  Shape out_shape = in_shape;
  out_shape[dim] = b;
  Tensor out = xt::zeros<double>(out_shape);
  bool modeled = native && dev.transport().native_reduce_scatter(g, staging.data(), out.size(), out.data());
  if (!modeled) {
    ring_reduce_scatter(dev, g, staging.data(), off);
    std::copy(staging.begin() + off[g.me], staging.begin() + off[g.me + 1], out.begin());
  }
  if (modeled) {
    const std::size_t bytes = predicted_bytes_sent("reduce_scatter", n, local.size() * sizeof(double));
    rec.done_modeled(out.size() * sizeof(double), bytes, bytes, predicted_messages("reduce_scatter", n));
  } else {
    rec.done(out.size() * sizeof(double));
  }
  return out;
}

Tensor all_reduce(Device& dev, const Tensor& local, const std::vector<std::string>& axes, const std::string& tensor) {
  Group g = dev.group(axes);
  const int n = g.size();
  const bool native = dev.native();
  CallRecord rec(dev, g, "all_reduce", tensor, native ? "native" : "ring", local.size() * sizeof(double),
                 describe("all_reduce", axes, tensor, local, ""));
  Tensor out = local;
  bool modeled = native && dev.transport().native_all_reduce(g, out.data(), out.size());
  if (!modeled) {
    const auto off = chunk_offsets(out.size(), n);
    ring_reduce_scatter(dev, g, out.data(), off);
    ring_all_gather(dev, g, out.data(), off);
  }
  if (modeled) {
    const std::size_t bytes = predicted_bytes_sent("all_reduce", n, local.size() * sizeof(double));
    rec.done_modeled(out.size() * sizeof(double), bytes, bytes, predicted_messages("all_reduce", n));
  } else {
    rec.done(out.size() * sizeof(double));
  }
  return out;
}

}  // namespace shardlab
