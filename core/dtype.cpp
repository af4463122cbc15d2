#include "core/dtype.hpp"

#include <limits>

#include <type_traits>

#include <cmath>
#include <cstring>

#include "core/error.hpp"

namespace shardlab {

bfloat16::bfloat16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it a (quiet) NaN, whatever its low bits
    bits = static_cast<std::uint16_t>((u >> 16) | 0x40u);
    return;
  }
  if ((u & 0x7fffffffu) < 0x00800000u) {  // zero or subnormal: a zero of its sign (dtype.hpp)
    bits = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
    return;
  }
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even; overflow carries into inf
  bits = static_cast<std::uint16_t>(u >> 16);
}

bfloat16::operator float() const {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

DType parse_dtype(const std::string& text) {
  if (text == "float32") return DType::float32;
  if (text == "float64") return DType::float64;
  if (text == "bfloat16") return DType::bfloat16;
  throw Error(ErrorKind::parse, "element type '" + text + "' is not one of " + dtype_names());
}

std::string dtype_name(DType t) {
  switch (t) {
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::bfloat16: return "bfloat16";
  }
  return "?";
}

std::string dtype_names() { return "float32|float64|bfloat16"; }

std::size_t element_bytes(DType t) {
  switch (t) {
    case DType::float32: return 4;
    case DType::float64: return 8;
    case DType::bfloat16: return 2;
  }
  return 0;
}

std::string dtype_text(DType t) { return dtype_name(t) + ", " + std::to_string(element_bytes(t)) + " B per element"; }

double smallest_normal(DType t) {  // the flush threshold of every rounding to t (dtype.hpp)
  return t == DType::float64 ? std::numeric_limits<double>::min() : double(std::numeric_limits<float>::min());
}

double unit_roundoff(DType t) {
  switch (t) {
    case DType::float32: return std::ldexp(1.0, -24);
    case DType::float64: return std::ldexp(1.0, -53);
    case DType::bfloat16: return std::ldexp(1.0, -8);
  }
  return 0;
}

double compute_roundoff(DType t) { return unit_roundoff(t == DType::bfloat16 ? DType::float32 : t); }

bfloat16 bfloat16_from_double(double v) {
  if (std::isnan(v) || std::isinf(v)) return bfloat16(static_cast<float>(v));
  // Below float32's smallest normal, which is bfloat16's too: a zero of v's sign. Above it the
  // float below is normal, so the steps that follow never make a subnormal.
  if (std::fabs(v) < FLT_MIN) return bfloat16(static_cast<float>(v * 0.0));
  float f = static_cast<float>(v);  // to nearest; step back toward zero if that went past v
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  if (static_cast<double>(f) != v && std::isfinite(f)) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    u |= 1u;  // sticky: v lies strictly between f and the next float away from zero
    std::memcpy(&f, &u, sizeof u);
  }
  return bfloat16(f);
}

double round_to(DType t, double v) {
  switch (t) {
    case DType::float32: return float_from_double(v);
    case DType::float64: return flush_subnormal(v);
    case DType::bfloat16: return static_cast<float>(bfloat16_from_double(v));
  }
  return v;
}

namespace {
// The reduction step of every sim ReduceScatter/AllReduce: two loops whose pointers cannot alias,
// vectorised with the full cost model (-O2's "very cheap" one leaves loops of unknown length
// scalar). Two normal partial sums can cancel into the subnormal range: flushed (dtype.hpp), as a
// select of two values, which the vectoriser takes (flush_subnormal's multiply it does not).
template <class T>
inline T flushed(T v) { return std::fabs(v) < std::numeric_limits<T>::min() ? std::copysign(T(0), v) : v; }

template <class T>
__attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic"))) void add_typed(void* out, const void* a, const void* b, std::size_t n) {
  T* __restrict o = static_cast<T*>(out);
  const T* __restrict y = static_cast<const T*>(b);
  if (out == a) {
    for (std::size_t i = 0; i < n; ++i) o[i] = flushed(T(o[i] + y[i]));
    return;
  }
  const T* __restrict x = static_cast<const T*>(a);
  for (std::size_t i = 0; i < n; ++i) o[i] = flushed(T(x[i] + y[i]));
}

template <class From>
void convert_from(const From* src, DType to, void* dst, std::size_t n) {
  switch (to) {
    case DType::float32: {
      float* d = static_cast<float*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = element_cast<float>(src[i]);
      break;
    }
    case DType::float64: {
      double* d = static_cast<double*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = element_cast<double>(src[i]);
      break;
    }
    case DType::bfloat16: {
      bfloat16* d = static_cast<bfloat16*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = element_cast<bfloat16>(src[i]);
      break;
    }
  }
}
}  // namespace

namespace {

template <class T>
void max_typed(void* out, const void* a, const void* b, std::size_t n) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  auto value = [](T v) {
    if constexpr (std::is_same_v<T, bfloat16>)
      return static_cast<float>(v);
    else
      return v;
  };
  for (std::size_t i = 0; i < n; ++i) o[i] = value(y[i]) > value(x[i]) ? y[i] : x[i];
}

}  // namespace

void combine_elements(DType t, Reduce op, void* out, const void* a, const void* b, std::size_t n) {
  if (op == Reduce::sum) return add_elements(t, out, a, b, n);
  switch (t) {
    case DType::float32: max_typed<float>(out, a, b, n); break;
    case DType::float64: max_typed<double>(out, a, b, n); break;
    case DType::bfloat16: max_typed<bfloat16>(out, a, b, n); break;
  }
}

void add_elements(DType t, void* out, const void* a, const void* b, std::size_t n) {
  switch (t) {
    case DType::float32: add_typed<float>(out, a, b, n); break;
    case DType::float64: add_typed<double>(out, a, b, n); break;
    case DType::bfloat16: {
      bfloat16* o = static_cast<bfloat16*>(out);
      const bfloat16* x = static_cast<const bfloat16*>(a);
      const bfloat16* y = static_cast<const bfloat16*>(b);
      for (std::size_t i = 0; i < n; ++i) o[i] = bfloat16(static_cast<float>(x[i]) + static_cast<float>(y[i]));
      break;
    }
  }
}

void convert_elements(DType from, const void* src, DType to, void* dst, std::size_t n) {
  if (n == 0) return;  // empty blocks may come with null pointers
  if (from == to) {
    std::memcpy(dst, src, n * element_bytes(from));
    return;
  }
  switch (from) {
    case DType::float32: convert_from(static_cast<const float*>(src), to, dst, n); break;
    case DType::float64: convert_from(static_cast<const double*>(src), to, dst, n); break;
    case DType::bfloat16: convert_from(static_cast<const bfloat16*>(src), to, dst, n); break;
  }
}

}  // namespace shardlab
