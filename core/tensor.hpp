// Tensor types and small helpers shared by every layer.
// Tensor is an xtensor array of double, row-major: the values lessons reason with and references
// are computed in. Devices hold and move blocks in their element type (core/dtype.hpp): float64
// as Tensor, float32 as TensorF, bfloat16 as TensorBF. Lessons use small integers so sums stay exact.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

#include "core/dtype.hpp"

namespace shardlab {

using Tensor = xt::xarray<double>;
using TensorF = xt::xarray<float>;
using TensorBF = xt::xarray<bfloat16>;
using Shape = std::vector<std::size_t>;

template <class T>
Shape shape_of(const xt::xarray<T>& t) {
  return Shape(t.shape().begin(), t.shape().end());
}
// Elementwise conversion, rounding to nearest (float64, float32 and bfloat16 each way).
template <class To, class From>
xt::xarray<To> converted(const xt::xarray<From>& t);
// `t` with every value rounded to what type `d` stores, kept as double.
Tensor rounded(const Tensor& t, DType d);
// `count` parts added as devices add partial sums: each part(k) rounded to `d`, then summed in
// `d` one at a time, from part 0 or (last_first) from the last. The references use it to run a
// sum in another order than one kernel call (harness/check/program_check.hpp).
Tensor sum_rounded(std::size_t count, bool last_first, DType d, const std::function<Tensor(std::size_t)>& part);
std::size_t element_count(const Shape& shape);
// Bytes of a tensor of `shape` whose elements take `element_bytes` each.
inline std::size_t bytes_of(const Shape& shape, std::size_t element_bytes) {
  return element_count(shape) * element_bytes;
}
std::string shape_text(const Shape& shape);  // "[16, 64]"

// Deterministic inputs: the same seed gives the same tensor on every backend and rank.
Tensor random_integers(const Shape& shape, std::uint64_t seed, int lo, int hi);  // uniform in [lo, hi]
// The same numbers straight into element type T (no float64 copy of a large tensor), scaled by
// `scale` (a power of two keeps them exact).
template <class T>
xt::xarray<T> random_integers_as(const Shape& shape, std::uint64_t seed, int lo, int hi, double scale = 1.0);
Tensor random_uniform(const Shape& shape, std::uint64_t seed, double lo, double hi);
Tensor iota(const Shape& shape, double start = 0.0);  // 0, 1, 2, ... in row-major order

// "32,256" -> {32, 256}; throws Error(parse) naming `what` on malformed text.
Shape parse_shape(const std::string& text, const std::string& what);

}  // namespace shardlab
