#include "core/split.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace shardlab {

Tensor split_op(const Tensor& x, std::size_t dim, std::size_t part) {
  if (dim >= x.dimension() || part >= x.shape()[dim])
    throw Error(ErrorKind::rank_mismatch, "split: part " + std::to_string(part) + " of dim " + std::to_string(dim) +
                                              " of a tensor of rank " + std::to_string(x.dimension()));
  Shape shape(x.shape().begin(), x.shape().end());
  const std::size_t n = shape[dim];
  shape.erase(shape.begin() + static_cast<long>(dim));
  Tensor out = xt::empty<double>(shape);
  std::size_t inner = 1, outer = 1;  // x is (outer, n, inner) row-major; out is (outer, inner)
  for (std::size_t d = dim + 1; d < x.dimension(); ++d) inner *= x.shape()[d];
  for (std::size_t d = 0; d < dim; ++d) outer *= x.shape()[d];
  for (std::size_t o = 0; o < outer; ++o) {
    const double* from = x.data() + (o * n + part) * inner;
    std::copy(from, from + inner, out.data() + o * inner);
  }
  return out;
}

Tensor concat_op(const std::vector<Tensor>& parts, std::size_t dim) {
  if (parts.empty() || dim > parts[0].dimension())
    throw Error(ErrorKind::rank_mismatch, "concat: no parts, or dim " + std::to_string(dim) + " past their rank");
  const Shape one(parts[0].shape().begin(), parts[0].shape().end());
  for (const auto& p : parts)
    if (Shape(p.shape().begin(), p.shape().end()) != one)
      throw Error(ErrorKind::rank_mismatch, "concat: parts of different shapes");
  Shape shape = one;
  const std::size_t n = parts.size();
  shape.insert(shape.begin() + static_cast<long>(dim), n);
  Tensor out = xt::empty<double>(shape);
  std::size_t inner = 1, outer = 1;  // out is (outer, n, inner); each part (outer, inner)
  for (std::size_t d = dim; d < one.size(); ++d) inner *= one[d];
  for (std::size_t d = 0; d < dim; ++d) outer *= one[d];
  for (std::size_t k = 0; k < n; ++k)
    for (std::size_t o = 0; o < outer; ++o) {
      const double* from = parts[k].data() + o * inner;
      std::copy(from, from + inner, out.data() + (o * n + k) * inner);
    }
  return out;
}

}  // namespace shardlab
