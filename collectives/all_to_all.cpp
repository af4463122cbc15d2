// AllToAll by pairwise exchange: at step s (1..n-1) member r sends its slice for member r+s and
// receives member r-s's slice for r. Each member sends n-1 of its n slices.
#include <vector>

#include "collectives/call.hpp"
#include "collectives/collectives.hpp"
#include "collectives/predict.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"

namespace shardlab {

Tensor all_to_all(Device& dev, const Tensor& local, const std::vector<std::string>& axes, std::size_t split_dim,
                  std::size_t concat_dim, const std::string& tensor) {
  const Shape in_shape = shape_of(local);
  if (split_dim >= in_shape.size() || concat_dim >= in_shape.size())
    throw Error(ErrorKind::rank_mismatch, "all_to_all of " + tensor + " splits dim " + std::to_string(split_dim) +
                                              " and concatenates dim " + std::to_string(concat_dim) +
                                              ", but its local block " + shape_text(in_shape) + " has rank " +
                                              std::to_string(in_shape.size()));
  Group g = dev.group(axes);
  const int n = g.size();
  if (in_shape[split_dim] % n != 0)
    throw Error(ErrorKind::not_divisible, "all_to_all of " + tensor + ": dim " + std::to_string(split_dim) +
                                              " (size " + std::to_string(in_shape[split_dim]) +
                                              ") is not divisible by the group over " + axes_text(axes) + " (size " +
                                              std::to_string(n) + ")");
  const bool native = dev.native();
  CallRecord rec(dev, g, "all_to_all", tensor, native ? "native" : "pairwise", local.size() * sizeof(double),
                 "all_to_all over " + axes_text(axes) + " of " + tensor + shape_text(in_shape) + " split dim " +
                     std::to_string(split_dim) + " concat dim " + std::to_string(concat_dim));
  const std::size_t b = in_shape[split_dim] / n, chunk = local.size() / n;
  std::vector<double> send(local.size()), recv(local.size());
  for (int i = 0; i < n; ++i) copy_out(local.data(), in_shape, split_dim, i * b, b, send.data() + i * chunk);
  bool modeled = native && dev.transport().native_all_to_all(g, send.data(), chunk, recv.data());
  if (!modeled) {
    std::copy(send.begin() + g.me * chunk, send.begin() + (g.me + 1) * chunk, recv.begin() + g.me * chunk);
    for (int s = 1; s < n; ++s) {
      const int to = (g.me + s) % n, from = (g.me + n - s) % n;
      dev.transport().sendrecv(g, to, send.data() + to * chunk, chunk * sizeof(double), from,
                               recv.data() + from * chunk, chunk * sizeof(double));
    }
  }
  Shape piece = in_shape;
  piece[split_dim] = b;
  Shape out_shape = piece;
  out_shape[concat_dim] *= n;
  Tensor out = xt::zeros<double>(out_shape);
  for (int i = 0; i < n; ++i)
    copy_in(out.data(), out_shape, concat_dim, i * piece[concat_dim], piece[concat_dim], recv.data() + i * chunk);
  if (modeled) {
    const std::size_t bytes = predicted_bytes_sent("all_to_all", n, local.size() * sizeof(double));
    rec.done_modeled(out.size() * sizeof(double), bytes, bytes, predicted_messages("all_to_all", n));
  } else {
    rec.done(out.size() * sizeof(double));
  }
  return out;
}

}  // namespace shardlab
