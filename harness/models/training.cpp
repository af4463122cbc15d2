#include "harness/models/training.hpp"

#include <algorithm>
#include <cmath>

#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "collectives/collectives.hpp"
#include "collectives/predict.hpp"
#include "core/error.hpp"

namespace shardlab {

Adam::Adam(const Shape& shape) : m(xt::zeros<double>(shape)), v(xt::zeros<double>(shape)) {}

void Adam::step(Tensor& w, const Tensor& g, int t, const AdamParams& p) {
  m = p.beta1 * m + (1 - p.beta1) * g;
  v = p.beta2 * v + (1 - p.beta2) * g * g;
  const double c1 = 1 - std::pow(p.beta1, t), c2 = 1 - std::pow(p.beta2, t);
  w = w - p.lr * (m / c1) / (xt::sqrt(v / c2) + p.eps);
}

Tensor transposed(const Tensor& t) { return xt::transpose(t); }
Tensor zeros_like(const Tensor& t) { return xt::zeros<double>(t.shape()); }

std::vector<std::size_t> chunk_counts(std::size_t rows, std::size_t parts) {
  const std::size_t q = (rows + parts - 1) / parts;
  std::vector<std::size_t> out;
  for (std::size_t k = 0; k < parts; ++k) out.push_back(k * q >= rows ? 0 : std::min(q, rows - k * q));
  return out;
}

namespace {
// [start, stop) of block `part` of chunk_counts(rows, parts).
std::pair<std::size_t, std::size_t> chunk_range(std::size_t rows, std::size_t part, std::size_t parts) {
  const std::size_t q = (rows + parts - 1) / parts;
  return {std::min(part * q, rows), std::min((part + 1) * q, rows)};
}
}  // namespace

Tensor row_block(const Tensor& t, std::size_t part, std::size_t parts) {
  const auto [lo, hi] = chunk_range(t.shape()[0], part, parts);
  return xt::view(t, xt::range(lo, hi), xt::all());
}

Tensor col_block(const Tensor& t, std::size_t part, std::size_t parts) {
  const auto [lo, hi] = chunk_range(t.shape()[1], part, parts);
  return xt::view(t, xt::all(), xt::range(lo, hi));
}

Tensor pad_rows(const Tensor& t, std::size_t rows) {
  if (t.shape()[0] == rows) return t;
  Tensor out = xt::zeros<double>(Shape{rows, t.shape()[1]});
  xt::view(out, xt::range(0, t.shape()[0]), xt::all()) = t;
  return out;
}

Tensor pad_cols(const Tensor& t, std::size_t cols) {
  if (t.shape()[1] == cols) return t;
  Tensor out = xt::zeros<double>(Shape{t.shape()[0], cols});
  xt::view(out, xt::all(), xt::range(0, t.shape()[1])) = t;
  return out;
}

RowSlicing::RowSlicing(std::size_t rows, std::size_t devices, std::size_t device, Uneven uneven)
    : n(devices), me(device), counts(chunk_counts(rows, devices)) {
  std::size_t r = 0;
  for (std::size_t c : counts) {
    at.push_back(r);
    r += c;
  }
  even = rows % n == 0;
  if (!even && uneven == Uneven::none)
    throw Error(ErrorKind::not_divisible, std::to_string(rows) + " rows do not split over " + std::to_string(n) +
                                              " devices; use --uneven chunk or pad");
  pad = !even && uneven == Uneven::pad;
  stored = pad ? counts[0] : counts[me];
}

Tensor RowSlicing::own(const Tensor& whole) const { return pad_rows(row_block(whole, me, n), stored); }

Tensor RowSlicing::gather(Device& dev, const Tensor& own, const std::vector<std::string>& axes,
                          const std::string& label) const {
  if (even) return all_gather(dev, own, axes, 0, label);
  if (!pad) return all_gather_v(dev, own, axes, 0, counts, label);
  // Padded shares of ceil(rows/n); only trailing shares are short, so the real rows come first.
  const Tensor all = all_gather(dev, own, axes, 0, label);
  return xt::view(all, xt::range(0, rows()), xt::all());
}

Tensor RowSlicing::scatter(Device& dev, const Tensor& whole, const std::vector<std::string>& axes,
                           const std::string& label) const {
  if (even) return reduce_scatter(dev, whole, axes, 0, label);
  if (!pad) return reduce_scatter_v(dev, whole, axes, 0, counts, label);
  return reduce_scatter(dev, pad_rows(whole, stored * n), axes, 0, label);  // zero rows: padding's sum
}

namespace {
std::size_t ring_bytes(const RowSlicing& s, const char* op, std::size_t row_bytes) {
  std::vector<std::size_t> parts;
  for (std::size_t c : s.counts) parts.push_back((s.pad ? s.stored : c) * row_bytes);
  return predicted_bytes_sent_v(op, parts, static_cast<int>(s.me));
}
}  // namespace

std::size_t RowSlicing::scatter_bytes(std::size_t row_bytes) const { return ring_bytes(*this, "reduce_scatter", row_bytes); }
std::size_t RowSlicing::gather_bytes(std::size_t row_bytes) const { return ring_bytes(*this, "all_gather", row_bytes); }

}  // namespace shardlab
