#include "core/roll.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace shardlab {

Tensor roll_op(const Tensor& x, std::size_t dim, long by) {
  if (dim >= x.dimension())
    throw Error(ErrorKind::rank_mismatch, "roll along dim " + std::to_string(dim) + " of a tensor of rank " +
                                              std::to_string(x.dimension()));
  const std::size_t n = x.shape()[dim];
  Tensor out = xt::empty<double>(x.shape());
  if (n == 0 || x.size() == 0) return out;
  std::size_t inner = 1, outer = 1;
  for (std::size_t d = dim + 1; d < x.dimension(); ++d) inner *= x.shape()[d];
  for (std::size_t d = 0; d < dim; ++d) outer *= x.shape()[d];
  const std::size_t shift = static_cast<std::size_t>(((by % long(n)) + long(n)) % long(n));
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t i = 0; i < n; ++i) {
      const double* from = x.data() + (o * n + i) * inner;
      std::copy(from, from + inner, out.data() + (o * n + (i + shift) % n) * inner);
    }
  return out;
}

}  // namespace shardlab
