// GELU, the erf form: gelu(x) = x/2 (1 + erf(x / sqrt 2)), and its derivative, elementwise.
// Typed forms compute gelu and gelu' in float64 and round each result to the type once (the
// product in the type's arithmetic, which for two values of the type rounds alike), so a sharded
// run and the reference that share an input get the same bits.
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
// a * b elementwise in T's arithmetic (same shapes).
template <class T>
xt::xarray<T> multiply_as(const xt::xarray<T>& a, const xt::xarray<T>& b);

}  // namespace shardlab
