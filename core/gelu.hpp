// GELU, the erf form: gelu(x) = x Phi(x) = x/2 erfc(-x / sqrt 2), and its derivative
// gelu'(x) = Phi(x) + x phi(x), elementwise. Typed forms compute gelu and gelu' in float64 and
// round each result to the type once, a zero below the type's smallest normal (core/dtype.hpp);
// the product likewise (exact in float64 for two float32 or bfloat16 values, then one rounding),
// so a sharded run and the reference that share an input get the same bits.
//
// erfc and exp come from glibc's vector math library (libmvec), 4 lanes with AVX2 and 2 without,
// chosen once per process from the CPU; every element, the last ones of an array too, goes
// through the same vector call, so an element's result does not depend on where it sits (a
// device's block and the gathered reference agree bit for bit). erfc rather than 1 + erf: for x
// below about -5, 1 + erf(x / sqrt 2) cancels, and gelu and gelu' lost every significant bit
// long before float32's smallest normal.
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
// dg * gelu'(h): multiply_as(dg, gelu_grad_as(h)) bit for bit, in one pass without the slope's
// tensor (the backward's largest temporary).
template <class T>
xt::xarray<T> gelu_backward_as(const xt::xarray<T>& dg, const xt::xarray<T>& h);

}  // namespace shardlab
