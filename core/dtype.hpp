// Element types: what one element of a tensor is stored and moved as.
//   float32   4 B  IEEE single; the default, as in the articles' JAX code
//   float64   8 B  IEEE double
//   bfloat16  2 B  the top half of a float32 (8 exponent bits, 8 significant bits): stored and
//                  moved in 2 bytes, computed in float32 (products accumulate in float32, results
//                  round back to bfloat16), as mixed-precision training does
// Integers up to 256 in magnitude are exact in all three (2^8 for bfloat16, 2^24 float32, 2^53
// float64), so lessons' small integer inputs and their sums stay exact.
//
// No type holds subnormals: a value whose magnitude is below the type's smallest normal (2^-126 for
// float32 and bfloat16, 2^-1022 for float64) is stored as a zero of its sign. On Intel CPUs every
// FMA that reads a subnormal float32 takes a microcode assist (a GEMM with 1% subnormal operands
// ran 20x slower), and gelu'(h), softmax and exp land there routinely. The flush is done here, in
// every rounding to a type (element_cast, round_to, bfloat16's constructor), and on every GEMM
// result and collective sum, so it is part of the arithmetic both the sharded run and the
// unsharded reference do, on every backend and whatever a thread's MXCSR says (core/subnormal.hpp
// also sets flush-to-zero in every thread, for what BLAS computes inside a GEMM). The error it adds
// is below the smallest normal per rounding: the verifier's bounds carry it (program_check.hpp).
#pragma once
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

namespace shardlab {

enum class DType { float32, float64, bfloat16 };

// Round to nearest, ties to even, from float; NaN stays NaN; below 2^-126 in magnitude, a zero of
// the float's sign. Converts to float exactly.
struct bfloat16 {
  std::uint16_t bits = 0;
  bfloat16() = default;
  explicit bfloat16(float f);
  operator float() const;
};

DType parse_dtype(const std::string& text);  // "float32" | "float64" | "bfloat16"; else Error(parse)
std::string dtype_name(DType t);             // "float32"
std::string dtype_names();                   // "float32|float64|bfloat16"
std::size_t element_bytes(DType t);          // 4, 8, 2
std::string dtype_text(DType t);             // "float32, 4 B per element"
// Unit roundoff u: one rounding to nearest is off by at most u times the value (2^-24, 2^-53, 2^-8).
double unit_roundoff(DType t);
// The smallest positive normal number of t (float32 and bfloat16 share float32's exponent).
double smallest_normal(DType t);
// The float32 unit roundoff for bfloat16 (its arithmetic is float32); else unit_roundoff.
double compute_roundoff(DType t);
double round_to(DType t, double v);  // v as the type stores it, back in double

// v, or a zero of its sign where |v| is below the smallest normal of v's own type (NaN stays NaN).
inline float flush_subnormal(float v) { return std::fabs(v) < FLT_MIN ? v * 0.0f : v; }
inline double flush_subnormal(double v) { return std::fabs(v) < DBL_MIN ? v * 0.0 : v; }
// v rounded to float32 as the type stores it: a zero where |v| < 2^-126 (decided before rounding,
// so no MXCSR setting changes the answer), else to nearest.
inline float float_from_double(double v) { return static_cast<float>(std::fabs(v) < FLT_MIN ? v * 0.0 : v); }

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::float32; }
template <> constexpr DType dtype_of<double>() { return DType::float64; }
template <> constexpr DType dtype_of<bfloat16>() { return DType::bfloat16; }

// One element converted between types (bfloat16 through float).
template <class To, class From>
inline To element_cast(From v) {
  return static_cast<To>(static_cast<float>(v));
}
template <> inline double element_cast<double, double>(double v) { return v; }
template <> inline double element_cast<double, float>(float v) { return v; }
template <> inline float element_cast<float, double>(double v) { return float_from_double(v); }
template <> inline float element_cast<float, float>(float v) { return v; }
// From double in one rounding (a zero where |v| < 2^-126): first to float by round-to-odd (truncate toward zero, then set the
// last bit if anything was cut), then to nearest even; going through float's own rounding could
// round twice (1 + 2^-8 + 2^-40 would land on 1.0 instead of 1 + 2^-7).
bfloat16 bfloat16_from_double(double v);
template <> inline bfloat16 element_cast<bfloat16, double>(double v) { return bfloat16_from_double(v); }

// How a reduction combines two elements: their sum, or the larger (an all-reduce of max).
enum class Reduce { sum, max };
// out[i] = a[i] op b[i] for n elements of type t (bfloat16 computes in float32 and rounds back; max
// is exact; a sum below the smallest normal is flushed to zero). out may be a but must not otherwise overlap a or b.
void combine_elements(DType t, Reduce op, void* out, const void* a, const void* b, std::size_t n);
// out[i] = a[i] + b[i] for n elements of type t (bfloat16: add in float32, round back). out may be
// a (an add in place) but must not otherwise overlap a or b.
void add_elements(DType t, void* out, const void* a, const void* b, std::size_t n);
// acc[i] += in[i]: add_elements(t, acc, acc, in, n).
inline void add_into(DType t, void* acc, const void* in, std::size_t n) { add_elements(t, acc, acc, in, n); }
// n elements of type `from` at src written as type `to` at dst (the same buffer is not allowed).
void convert_elements(DType from, const void* src, DType to, void* dst, std::size_t n);

}  // namespace shardlab
