#include "core/gelu.hpp"

#include <cmath>

namespace shardlab {

Tensor gelu(const Tensor& x) {
  Tensor y = x;
  for (auto& v : y) v = 0.5 * v * (1.0 + std::erf(v * M_SQRT1_2));
  return y;
}

Tensor gelu_grad(const Tensor& x) {
  Tensor y = x;
  const double inv_sqrt_2pi = 0.5 * M_2_SQRTPI * M_SQRT1_2;  // 1/sqrt(2 pi)
  for (auto& v : y) v = 0.5 * (1.0 + std::erf(v * M_SQRT1_2)) + v * inv_sqrt_2pi * std::exp(-0.5 * v * v);
  return y;
}

}  // namespace shardlab
