// Tensor type and small helpers shared by every layer.
// Tensors are xtensor arrays of double, row-major. Lessons use small integers so sums stay exact.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

namespace shardlab {

using Tensor = xt::xarray<double>;
using Shape = std::vector<std::size_t>;

Shape shape_of(const Tensor& t);
std::size_t element_count(const Shape& shape);
std::string shape_text(const Shape& shape);  // "[16, 64]"

// Deterministic inputs: the same seed gives the same tensor on every backend and rank.
Tensor random_integers(const Shape& shape, std::uint64_t seed, int lo, int hi);  // uniform in [lo, hi]
Tensor random_uniform(const Shape& shape, std::uint64_t seed, double lo, double hi);
Tensor iota(const Shape& shape, double start = 0.0);  // 0, 1, 2, ... in row-major order

// "32,256" -> {32, 256}; throws Error(parse) naming `what` on malformed text.
Shape parse_shape(const std::string& text, const std::string& what);

}  // namespace shardlab
