#include "core/tensor.hpp"

#include <random>
#include <sstream>

#include "core/error.hpp"
#include "core/text.hpp"

namespace shardlab {

template <class To, class From>
xt::xarray<To> converted(const xt::xarray<From>& t) {
  xt::xarray<To> out = xt::empty<To>(t.shape());
  convert_elements(dtype_of<From>(), t.data(), dtype_of<To>(), out.data(), t.size());
  return out;
}
#define SHARDLAB_CONVERTED(TO)                                              \
  template xt::xarray<TO> converted<TO, double>(const xt::xarray<double>&); \
  template xt::xarray<TO> converted<TO, float>(const xt::xarray<float>&);   \
  template xt::xarray<TO> converted<TO, bfloat16>(const xt::xarray<bfloat16>&);
SHARDLAB_CONVERTED(double)
SHARDLAB_CONVERTED(float)
SHARDLAB_CONVERTED(bfloat16)
#undef SHARDLAB_CONVERTED

Tensor rounded(const Tensor& t, DType d) {
  Tensor out = xt::empty<double>(t.shape());
  for (std::size_t i = 0; i < t.size(); ++i) out.data()[i] = round_to(d, t.data()[i]);
  return out;
}

Tensor sum_rounded(std::size_t count, bool last_first, DType d, const std::function<Tensor(std::size_t)>& part) {
  Tensor sum;
  for (std::size_t j = 0; j < count; ++j) {
    const Tensor p = rounded(part(last_first ? count - 1 - j : j), d);
    sum = j == 0 ? p : rounded(sum + p, d);
  }
  return sum;
}

std::size_t element_count(const Shape& shape) {
  std::size_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

std::string shape_text(const Shape& shape) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

// std::mt19937_64 is fully specified by the standard; the distributions are not, so we map
// its output to values ourselves and every platform draws the same numbers.
Tensor random_integers(const Shape& shape, std::uint64_t seed, int lo, int hi) {
  return random_integers_as<double>(shape, seed, lo, hi);
}

template <class T>
xt::xarray<T> random_integers_as(const Shape& shape, std::uint64_t seed, int lo, int hi, double scale) {
  std::mt19937_64 rng(seed);
  xt::xarray<T> t = xt::empty<T>(shape);
  const std::uint64_t span = static_cast<std::uint64_t>(hi - lo + 1);
  for (auto& v : t) v = element_cast<T>(scale * (lo + static_cast<int>(rng() % span)));
  return t;
}
template xt::xarray<double> random_integers_as<double>(const Shape&, std::uint64_t, int, int, double);
template xt::xarray<float> random_integers_as<float>(const Shape&, std::uint64_t, int, int, double);
template xt::xarray<bfloat16> random_integers_as<bfloat16>(const Shape&, std::uint64_t, int, int, double);

Tensor random_uniform(const Shape& shape, std::uint64_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  Tensor t = xt::zeros<double>(shape);
  for (auto& v : t) v = lo + (hi - lo) * (static_cast<double>(rng() >> 11) * 0x1.0p-53);
  return t;
}

Tensor iota(const Shape& shape, double start) {
  Tensor t = xt::zeros<double>(shape);
  double v = start;
  for (auto& x : t) x = v++;
  return t;
}

Shape parse_shape(const std::string& text, const std::string& what) {
  Shape shape;
  for (const auto& part : split(text, ',')) {
    shape.push_back(static_cast<std::size_t>(parse_positive(trim(part), what)));
  }
  if (shape.empty()) throw Error(ErrorKind::parse, what + " is empty; expected sizes like 4,16,4");
  return shape;
}

}  // namespace shardlab
