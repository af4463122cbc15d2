// Small pieces the training lessons share (15 ZeRO, 16 pipeline, 17 3D): Adam, and the row or
// column block a device owns of a whole tensor.
#pragma once
#include <cstddef>

#include "core/tensor.hpp"

namespace shardlab {

struct AdamParams {
  double lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};

// Adam's state for one tensor (or the block of it a device owns): m and v start at 0.
struct Adam {
  Tensor m, v;
  Adam() = default;
  explicit Adam(const Shape& shape);
  // Step t (1, 2, ...): w -= lr m^ / (sqrt(v^) + eps), with the bias-corrected m^ and v^.
  void step(Tensor& w, const Tensor& g, int t, const AdamParams& p);
};

Tensor transposed(const Tensor& t);
Tensor zeros_like(const Tensor& t);
// Block `part` of `parts` equal blocks along dim 0 (rows) or dim 1 (columns).
Tensor row_block(const Tensor& t, std::size_t part, std::size_t parts);
Tensor col_block(const Tensor& t, std::size_t part, std::size_t parts);

}  // namespace shardlab
