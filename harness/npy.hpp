// .npy files (NumPy's format) for `shardlab matmul` and `shardlab einsum`, through xtensor's
// xnpy. Reads float32 or float64 little-endian arrays in C order into the double Tensor; writes
// float64 (or float32) in C order. Every failure is Error(io) naming the file and what is wrong.
#pragma once
#include <string>

#include "core/tensor.hpp"

namespace shardlab {

enum class NpyType { float32, float64 };
NpyType parse_npy_type(const std::string& text);  // "float32" | "float64" (also f4, f8)

struct NpyArray {
  Tensor data;
  NpyType type = NpyType::float64;  // as stored in the file
};

NpyArray load_npy(const std::string& path);
// Checks, before any work, that save_npy could write `path`: its directory exists and is
// writable, and `path` is not a directory. Error(io) otherwise; nothing is created.
void check_writable(const std::string& path);
// Writes to a temporary file beside `path`, then renames it over `path`: a reader never sees a
// half-written file, and a failed write leaves any old file as it was.
void save_npy(const std::string& path, const Tensor& data, NpyType type = NpyType::float64);

}  // namespace shardlab
