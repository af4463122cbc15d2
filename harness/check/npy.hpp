// .npy files (NumPy's format), through xtensor's xnpy: matmul's and einsum's operands, and each
// entry of a .npz (harness/check/npz.hpp). Reads float16, float32, float64 and bfloat16
// little-endian arrays in C order into the double Tensor (every value exactly); writes float64,
// float32 or float16 in C order. Every failure is Error(io) naming the file and what is wrong.
// numpy has no bfloat16 type: ml_dtypes (JAX's) registers one, and np.save writes its dtype.str,
// the 2-byte void '<V2'; such a file is read as bfloat16 (each word the upper half of a float32).
// It is not written: numpy alone could not read it back, and float32 holds every bfloat16 value.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>

#include "core/tensor.hpp"

namespace shardlab {

enum class NpyType { float16, float32, float64, bfloat16 };  // bfloat16: read only
// "float16" | "float32" | "float64" (also f2, f4, f8); else Error(parse) naming them, with its
// own sentence for "bfloat16".
NpyType parse_npy_type(const std::string& text);
std::string npy_type_name(NpyType t);  // "float16"

// IEEE half precision (numpy's float16, '<f2'): 1 sign, 5 exponent, 10 fraction bits.
// to_half rounds to nearest, ties to even, straight from the double (going through float would
// round twice); subnormals kept, overflow to inf, NaN stays NaN. from_half is exact.
std::uint16_t to_half(double v);
double from_half(std::uint16_t bits);

struct NpyArray {
  Tensor data;
  NpyType type = NpyType::float64;  // as stored in the file
};

NpyArray load_npy(const std::string& path);
// The same from `size` bytes that `read(into, n)` hands over in order (an entry of a .npz); `name`
// names them in messages. The header is checked against `size` before the data is allocated, and
// a header holding a NUL byte is refused (as NumPy does).
NpyArray read_npy(const std::string& name, std::uint64_t size, const std::function<void(char*, std::uint64_t)>& read);
// Refuses an input holding NaN or an infinity: Error(io) naming the file and the first such index.
void refuse_non_finite(const std::string& path, const Tensor& t);
// Checks, before any work, that save_npy could write `path`: its directory exists and is
// writable, and `path` is not a directory or any other file that is not a regular one (renaming
// over /dev/full would replace the device). Error(io) otherwise; nothing is created.
void check_writable(const std::string& path);
// Writes to a temporary file beside `path`, then renames it over `path`: a reader never sees a
// half-written file, and a failed write leaves any old file as it was.
void save_npy(const std::string& path, const Tensor& data, NpyType type = NpyType::float64);
// The file's bytes to a stream (Error(unsupported) for bfloat16).
void write_npy(std::ostream& out, const Tensor& data, NpyType type = NpyType::float64);

}  // namespace shardlab
