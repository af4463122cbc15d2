#include "core/gelu.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <type_traits>

#include "core/error.hpp"
#include "core/trace.hpp"

// glibc 2.35 and later export erfc and exp in its vector ABI (the functions GCC calls when it
// vectorizes a loop under -ffast-math); called here by name, so this file needs no special flags.
#if defined(__x86_64__) && defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#define SHARDLAB_LIBMVEC 1
#include <immintrin.h>
#pragma GCC push_options
#pragma GCC target("avx2")
extern "C" {
__m128d _ZGVbN2v_erfc(__m128d);
__m128d _ZGVbN2v_exp(__m128d);
__m256d _ZGVdN4v_erfc(__m256d);
__m256d _ZGVdN4v_exp(__m256d);
}
#pragma GCC pop_options
#endif

namespace shardlab {

namespace {

// Elements per pass: a multiple of every vector width, small enough to stay in L1.
constexpr std::size_t kGeluBlock = 256;
constexpr std::size_t kGeluLanes = 4;  // a pass computes a multiple of this many elements

enum class VectorFn { erfc, exp };
enum class GeluOut { gelu, slope, backward };

#ifdef SHARDLAB_LIBMVEC
#pragma GCC push_options
#pragma GCC target("avx2")
void vector_apply_4(VectorFn f, double* a, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 4) {
    const __m256d v = _mm256_loadu_pd(a + i);
    _mm256_storeu_pd(a + i, f == VectorFn::erfc ? _ZGVdN4v_erfc(v) : _ZGVdN4v_exp(v));
  }
}
// float32 in 4 lanes, all in registers: each element goes through exactly the operations, in the
// same order, of GeluBlock, rounded_once and product_as below (the float64 function through the
// same erfc and exp, then one rounding, a zero below FLT_MIN), so the result is theirs bit for bit
// (tests/test_gelu.cpp compares the two); without the block buffers and the per-element
// conversions it takes about a third of their time. "avx2" and not "fma": a fused multiply-add
// would round once where the scalar code rounds twice.
__m256d rounded_to_float_range(__m256d r) {  // float_from_double's flush, before the conversion
  const __m256d size = _mm256_andnot_pd(_mm256_set1_pd(-0.0), r);
  const __m256d tiny = _mm256_cmp_pd(size, _mm256_set1_pd(FLT_MIN), _CMP_LT_OQ);
  return _mm256_blendv_pd(r, _mm256_mul_pd(r, _mm256_setzero_pd()), tiny);
}

__m128 gelu_lanes(GeluOut what, __m128 x, __m128 dg) {
  const __m256d v = _mm256_cvtps_pd(x);
  const __m256d e = _ZGVdN4v_erfc(_mm256_mul_pd(_mm256_xor_pd(v, _mm256_set1_pd(-0.0)), _mm256_set1_pd(M_SQRT1_2)));
  const __m256d half = _mm256_set1_pd(0.5);
  if (what == GeluOut::gelu) return _mm256_cvtpd_ps(rounded_to_float_range(_mm256_mul_pd(_mm256_mul_pd(half, v), e)));
  const __m256d p = _ZGVdN4v_exp(_mm256_mul_pd(_mm256_mul_pd(_mm256_set1_pd(-0.5), v), v));
  const __m256d inv_sqrt_2pi = _mm256_set1_pd(0.5 * M_2_SQRTPI * M_SQRT1_2);
  const __m256d r = _mm256_add_pd(_mm256_mul_pd(half, e), _mm256_mul_pd(_mm256_mul_pd(v, inv_sqrt_2pi), p));
  const __m128 slope = _mm256_cvtpd_ps(rounded_to_float_range(r));
  if (what == GeluOut::slope) return slope;
  return _mm256_cvtpd_ps(rounded_to_float_range(_mm256_mul_pd(_mm256_cvtps_pd(dg), _mm256_cvtps_pd(slope))));
}

// y[i] = gelu, gelu' or dg[i] * gelu' of x[i], for n elements (dg read for the backward only); the
// last n % 4 through the same lanes, zeros beside them.
void gelu_float_lanes(GeluOut what, const float* x, const float* dg, float* y, std::size_t n) {
  const bool backward = what == GeluOut::backward;
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4)
    _mm_storeu_ps(y + i, gelu_lanes(what, _mm_loadu_ps(x + i), backward ? _mm_loadu_ps(dg + i) : _mm_setzero_ps()));
  if (i == n) return;
  float xs[4] = {}, ds[4] = {}, ys[4];
  for (std::size_t j = i; j < n; ++j) {
    xs[j - i] = x[j];
    if (backward) ds[j - i] = dg[j];
  }
  _mm_storeu_ps(ys, gelu_lanes(what, _mm_loadu_ps(xs), _mm_loadu_ps(ds)));
  std::copy(ys, ys + (n - i), y + i);
}
#pragma GCC pop_options

void vector_apply_2(VectorFn f, double* a, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 2) {
    const __m128d v = _mm_loadu_pd(a + i);
    _mm_storeu_pd(a + i, f == VectorFn::erfc ? _ZGVbN2v_erfc(v) : _ZGVbN2v_exp(v));
  }
}
#endif

// a[i] = f(a[i]) for n elements, n a multiple of kGeluLanes: every element by the same code.
void vector_apply(VectorFn f, double* a, std::size_t n) {
#ifdef SHARDLAB_LIBMVEC
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return vector_apply_4(f, a, n);
  return vector_apply_2(f, a, n);
#else
  for (std::size_t i = 0; i < n; ++i) a[i] = f == VectorFn::erfc ? std::erfc(a[i]) : std::exp(a[i]);
#endif
}

// r rounded once to T, a zero of its sign below T's smallest normal (float64's too).
template <class T>
T rounded_once(double r) {
  return element_cast<T>(flush_subnormal(r));
}

// a * b in float64, rounded once to T.
template <class T>
T product_as(T a, T b) {
  return element_cast<T>(element_cast<double>(a) * element_cast<double>(b));
}

// One block of at most kGeluBlock elements: v = the inputs in float64 (zeros after n, up to the next
// multiple of kGeluLanes), e = erfc(-v / sqrt 2); with `slope`, p = exp(-v^2 / 2).
struct GeluBlock {
  double v[kGeluBlock], e[kGeluBlock], p[kGeluBlock];
  template <class T>
  void load(const T* in, std::size_t n, bool slope) {
    const std::size_t padded = (n + kGeluLanes - 1) / kGeluLanes * kGeluLanes;
    for (std::size_t i = 0; i < n; ++i) v[i] = element_cast<double>(in[i]);
    std::fill(v + n, v + padded, 0.0);
    for (std::size_t i = 0; i < padded; ++i) e[i] = -v[i] * M_SQRT1_2;
    vector_apply(VectorFn::erfc, e, padded);
    if (slope) {
      for (std::size_t i = 0; i < padded; ++i) p[i] = -0.5 * v[i] * v[i];
      vector_apply(VectorFn::exp, p, padded);
    }
  }
  double gelu(std::size_t i) const { return 0.5 * v[i] * e[i]; }
  double gelu_grad(std::size_t i) const {
    const double inv_sqrt_2pi = 0.5 * M_2_SQRTPI * M_SQRT1_2;  // 1/sqrt(2 pi)
    return 0.5 * e[i] + v[i] * inv_sqrt_2pi * p[i];
  }
};

// x in blocks of kGeluBlock, each loaded into a GeluBlock (with the slope's exp where `slope`), and
// each(block, i, at) for its elements: i within the block, at + i within x.
template <class T, class Each>
void for_each_gelu_block(const xt::xarray<T>& x, bool slope, Each each) {
  GeluBlock b;
  for (std::size_t at = 0; at < x.size(); at += kGeluBlock) {
    const std::size_t n = std::min(kGeluBlock, x.size() - at);
    b.load(x.data() + at, n, slope);
    for (std::size_t i = 0; i < n; ++i) each(b, i, at + i);
  }
}

// y = gelu, gelu' or dg * gelu' of x through gelu_float_lanes, where T is float and the CPU has
// AVX2; false (nothing written) otherwise.
template <class T>
bool by_float_lanes(GeluOut what, const xt::xarray<T>& x, const T* dg, xt::xarray<T>& y) {
#ifdef SHARDLAB_LIBMVEC
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if constexpr (std::is_same<T, float>::value) {
    if (avx2) gelu_float_lanes(what, x.data(), dg, y.data(), x.size());
    return avx2;
  }
#endif
  (void)what, (void)x, (void)dg, (void)y;
  return false;
}

}  // namespace

// gelu and gelu' in float64 whatever T, rounded once to T: the function a program's reference
// applies (harness/check/program_check.hpp bounds the two runs' difference by their roundings
// alone, 2u |f|). In float32 arithmetic erf and exp are off by a few ulps of the argument's size,
// far more than an ulp of the result where gelu(z) is near 0 (z well below 0).
template <class T>
xt::xarray<T> gelu_as(const xt::xarray<T>& x) {
  TraceSpan span("gelu", [&] { return shape_text(shape_of(x)); });
  xt::xarray<T> y = xt::empty<T>(x.shape());
  if (by_float_lanes<T>(GeluOut::gelu, x, nullptr, y)) return y;
  for_each_gelu_block(x, false, [&](const GeluBlock& b, std::size_t i, std::size_t k) {
    y.data()[k] = rounded_once<T>(b.gelu(i));
  });
  return y;
}

template <class T>
xt::xarray<T> gelu_grad_as(const xt::xarray<T>& x) {
  TraceSpan span("gelu_grad", [&] { return shape_text(shape_of(x)); });
  xt::xarray<T> y = xt::empty<T>(x.shape());
  if (by_float_lanes<T>(GeluOut::slope, x, nullptr, y)) return y;
  for_each_gelu_block(x, true, [&](const GeluBlock& b, std::size_t i, std::size_t k) {
    y.data()[k] = rounded_once<T>(b.gelu_grad(i));
  });
  return y;
}

namespace {
void same_shape_or_throw(const char* what, const Shape& a, const Shape& b) {
  if (a != b) throw Error(ErrorKind::rank_mismatch, std::string(what) + " of " + shape_text(a) + " and " + shape_text(b));
}
}  // namespace

template <class T>
xt::xarray<T> multiply_as(const xt::xarray<T>& a, const xt::xarray<T>& b) {
  TraceSpan span("mul", [&] { return shape_text(shape_of(a)); });
  same_shape_or_throw("elementwise product", shape_of(a), shape_of(b));
  xt::xarray<T> y = xt::empty<T>(a.shape());
  for (std::size_t i = 0; i < a.size(); ++i) y.data()[i] = product_as(a.data()[i], b.data()[i]);
  return y;
}

template <class T>
xt::xarray<T> gelu_backward_as(const xt::xarray<T>& dg, const xt::xarray<T>& h) {
  TraceSpan span("gelu_backward", [&] { return shape_text(shape_of(h)); });
  same_shape_or_throw("dg * gelu'(h)", shape_of(dg), shape_of(h));
  xt::xarray<T> y = xt::empty<T>(h.shape());
  if (by_float_lanes(GeluOut::backward, h, dg.data(), y)) return y;
  for_each_gelu_block(h, true, [&](const GeluBlock& b, std::size_t i, std::size_t k) {
    y.data()[k] = product_as(dg.data()[k], rounded_once<T>(b.gelu_grad(i)));
  });
  return y;
}

#define SHARDLAB_GELU(T)                                                              \
  template xt::xarray<T> gelu_as<T>(const xt::xarray<T>&);                           \
  template xt::xarray<T> gelu_grad_as<T>(const xt::xarray<T>&);                      \
  template xt::xarray<T> multiply_as<T>(const xt::xarray<T>&, const xt::xarray<T>&); \
  template xt::xarray<T> gelu_backward_as<T>(const xt::xarray<T>&, const xt::xarray<T>&);
SHARDLAB_GELU(double)
SHARDLAB_GELU(float)
SHARDLAB_GELU(bfloat16)
#undef SHARDLAB_GELU

Tensor gelu(const Tensor& x) { return gelu_as(x); }
Tensor gelu_grad(const Tensor& x) { return gelu_grad_as(x); }

}  // namespace shardlab
