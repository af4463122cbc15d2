#include "core/tensor.hpp"

#include <random>
#include <sstream>

#include "core/error.hpp"
#include "core/text.hpp"

namespace shardlab {

Shape shape_of(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end()); }

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
  std::mt19937_64 rng(seed);
  Tensor t = xt::zeros<double>(shape);
  const std::uint64_t span = static_cast<std::uint64_t>(hi - lo + 1);
  for (auto& v : t) v = static_cast<double>(lo + static_cast<int>(rng() % span));
  return t;
}

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
