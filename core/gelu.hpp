// GELU, exact (erf) form, and its derivative: the elementwise nonlinearity of the FFN lessons.
//   gelu(x)  = x * Phi(x),            Phi(x) = (1 + erf(x / sqrt 2)) / 2
//   gelu'(x) = Phi(x) + x * phi(x),   phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
#pragma once
#include "core/tensor.hpp"

namespace shardlab {

Tensor gelu(const Tensor& x);
Tensor gelu_grad(const Tensor& x);  // d gelu / dx, elementwise

}  // namespace shardlab
