#include "core/gelu.hpp"

#include <algorithm>
#include <cmath>

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

#ifdef SHARDLAB_LIBMVEC
#pragma GCC push_options
#pragma GCC target("avx2")
void vector_apply_4(VectorFn f, double* a, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 4) {
    const __m256d v = _mm256_loadu_pd(a + i);
    _mm256_storeu_pd(a + i, f == VectorFn::erfc ? _ZGVdN4v_erfc(v) : _ZGVdN4v_exp(v));
  }
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

}  // namespace

// gelu and gelu' in float64 whatever T, rounded once to T: the function a program's reference
// applies (harness/check/program_check.hpp bounds the two runs' difference by their roundings
// alone, 2u |f|). In float32 arithmetic erf and exp are off by a few ulps of the argument's size,
// far more than an ulp of the result where gelu(z) is near 0 (z well below 0).
template <class T>
xt::xarray<T> gelu_as(const xt::xarray<T>& x) {
  TraceSpan span("gelu", [&] { return shape_text(shape_of(x)); });
  xt::xarray<T> y = xt::empty<T>(x.shape());
  for_each_gelu_block(x, false, [&](const GeluBlock& b, std::size_t i, std::size_t k) {
    y.data()[k] = rounded_once<T>(b.gelu(i));
  });
  return y;
}

template <class T>
xt::xarray<T> gelu_grad_as(const xt::xarray<T>& x) {
  TraceSpan span("gelu_grad", [&] { return shape_text(shape_of(x)); });
  xt::xarray<T> y = xt::empty<T>(x.shape());
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
