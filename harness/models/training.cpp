#include "harness/models/training.hpp"

#include <cmath>

#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

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

Tensor row_block(const Tensor& t, std::size_t part, std::size_t parts) {
  const std::size_t n = t.shape()[0] / parts;
  return xt::view(t, xt::range(part * n, (part + 1) * n), xt::all());
}

Tensor col_block(const Tensor& t, std::size_t part, std::size_t parts) {
  const std::size_t n = t.shape()[1] / parts;
  return xt::view(t, xt::all(), xt::range(part * n, (part + 1) * n));
}

}  // namespace shardlab
