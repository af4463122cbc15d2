// Small pieces the training lessons share (15 ZeRO, 16 pipeline, 17 3D): Adam, the row or column
// block a device owns of a whole tensor, and the collectives between devices' rows when the rows do
// not divide the devices.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "core/mesh.hpp"
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
// `rows` cut into `parts` as torch.chunk cuts: blocks of ceil(rows/parts), the last ones shorter
// (or empty). Equal blocks when parts divides rows.
std::vector<std::size_t> chunk_counts(std::size_t rows, std::size_t parts);
// Block `part` of `parts` along dim 0 (rows) or dim 1 (columns), cut as chunk_counts.
Tensor row_block(const Tensor& t, std::size_t part, std::size_t parts);
Tensor col_block(const Tensor& t, std::size_t part, std::size_t parts);
// t with zero rows (columns) appended up to `rows` (`cols`); t itself when it has that many.
Tensor pad_rows(const Tensor& t, std::size_t rows);
Tensor pad_cols(const Tensor& t, std::size_t cols);

class Device;
// One device's share of the rows of a tensor over a group of n devices, and the collectives
// between shares: even, or when n does not divide the rows, as `uneven` says. chunk: shares of
// chunk_counts rows, moved by the _v collectives (real rows only); pad: every share stored as
// ceil(rows/n) rows, the padding zero, moved by the plain collectives (padding included).
struct RowSlicing {
  std::size_t n = 1, me = 0, stored = 0;  // devices, this one, rows this device stores
  std::vector<std::size_t> counts, at;    // real rows per device, and where each starts
  bool even = true, pad = false;
  RowSlicing(std::size_t rows, std::size_t devices, std::size_t device, Uneven uneven);
  std::size_t rows() const { return at.back() + counts.back(); }
  // The own rows of a whole tensor, zero-padded to `stored` rows under pad.
  Tensor own(const Tensor& whole) const;
  // Every device's own rows, gathered into the whole tensor (real rows only).
  Tensor gather(Device& dev, const Tensor& own, const std::vector<std::string>& axes, const std::string& label) const;
  // The whole tensor summed over the devices; this device keeps its own rows (stored as own's).
  Tensor scatter(Device& dev, const Tensor& whole, const std::vector<std::string>& axes, const std::string& label) const;
  // The bytes a ring ReduceScatter (AllGather) of these rows, `row_bytes` each, sends from this
  // device: collectives/predict.hpp's formulas for the parts as they travel.
  std::size_t scatter_bytes(std::size_t row_bytes) const;
  std::size_t gather_bytes(std::size_t row_bytes) const;
};

}  // namespace shardlab
