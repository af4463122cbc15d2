// GELU, the erf form: gelu(x) = x/2 (1 + erf(x / sqrt 2)), and its derivative, elementwise.
// Typed forms compute gelu and gelu' in float64 and round each result to the type once, a zero
// below the type's smallest normal (core/dtype.hpp); the product likewise (exact in float64 for
// two float32 or bfloat16 values, then one rounding), so a sharded run and the reference that
// share an input get the same bits.
#pragma once
#include "core/tensor.hpp"

namespace shardlab {

Tensor gelu(const Tensor& x);
Tensor gelu_grad(const Tensor& x);  // d gelu / dx, elementwise

// Instantiated for double, float and bfloat16.
template <class T>
xt::xarray<T> gelu_as(const xt::xarray<T>& x);
template <class T>
xt::xarray<T> gelu_grad_as(const xt::xarray<T>& x);
// a * b elementwise, rounded once to T (same shapes).
template <class T>
xt::xarray<T> multiply_as(const xt::xarray<T>& a, const xt::xarray<T>& b);

}  // namespace shardlab
