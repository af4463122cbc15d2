// GELU against tabulated values of x*Phi(x), its derivative against central differences, both
// in float32 against long double libm, and the fused backward against its two steps.
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "core/gelu.hpp"
#include "core/tensor.hpp"

using namespace shardlab;

TEST_CASE("gelu matches x * Phi(x) at tabulated points") {
  // Phi(1) = 0.8413447460685429, Phi(-1) = 0.15865525393145707, Phi(2) = 0.9772498680518208
  Tensor x = {0.0, 1.0, -1.0, 2.0};
  Tensor y = gelu(x);
  CHECK(y(0) == 0.0);
  CHECK(y(1) == doctest::Approx(0.8413447460685429).epsilon(1e-15));
  CHECK(y(2) == doctest::Approx(-0.15865525393145707).epsilon(1e-15));
  CHECK(y(3) == doctest::Approx(2 * 0.9772498680518208).epsilon(1e-15));
}

TEST_CASE("gelu_grad matches central differences") {
  Tensor x = {-3.0, -1.5, -0.2, 0.0, 0.7, 2.5};
  const double h = 1e-5;
  Tensor g = gelu_grad(x);
  for (std::size_t i = 0; i < x.size(); ++i) {
    Tensor p = {x(i) + h}, m = {x(i) - h};
    const double fd = (gelu(p)(0) - gelu(m)(0)) / (2 * h);
    CAPTURE(x(i));
    CHECK(g(i) == doctest::Approx(fd).epsilon(1e-8));
  }
  CHECK(gelu_grad(Tensor{0.0})(0) == 0.5);  // Phi(0) + 0
}

namespace {

// gelu and gelu' in long double from libm's scalar erfcl and expl: a source apart from the vector
// erfc and exp core/gelu.cpp calls, 11 bits more precise than float64.
long double gelu_ld(long double v) { return 0.5L * v * erfcl(-v / sqrtl(2.0L)); }
long double gelu_grad_ld(long double v) {
  return 0.5L * erfcl(-v / sqrtl(2.0L)) + v * expl(-0.5L * v * v) / sqrtl(2.0L * 3.14159265358979323846264338327950288L);
}

// Whether got is ref rounded to float32 to nearest (within a millionth of an ulp of a tie), or 0
// where |ref| is below float32's smallest normal.
bool float_of(float got, long double ref) {
  if (std::fabs(static_cast<double>(ref)) < FLT_MIN) return got == 0.0f;
  const float near = static_cast<float>(ref);
  // In float64: float32's spacing near 2^-126 is itself subnormal, and flush-to-zero is on.
  const double ulp = static_cast<double>(std::nextafter(std::fabs(near), FLT_MAX)) - std::fabs(near);
  return std::fabs(static_cast<double>(got - ref)) <= 0.5 * ulp * (1 + 1e-6);
}

}  // namespace

TEST_CASE("float32 gelu and gelu' are the float64 function rounded once, down to the smallest normal") {
  // Every 1/64 from -14 to 10: through gelu's tail, where 1 + erf(x / sqrt 2) would cancel
  // (below about -5 it loses float32's bits, below about -8.3 it gives 0), to where gelu' < 2^-126.
  xt::xarray<float> x = xt::arange<float>(-14.0f, 10.0f, 1.0f / 64);
  const xt::xarray<float> g = gelu_as(x), s = gelu_grad_as(x);
  std::size_t wrong_g = 0, wrong_s = 0, subnormal = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    wrong_g += !float_of(g(i), gelu_ld(x(i)));
    wrong_s += !float_of(s(i), gelu_grad_ld(x(i)));
    for (float v : {g(i), s(i)}) subnormal += v != 0 && std::fabs(v) < FLT_MIN;
  }
  CHECK(wrong_g == 0);
  CHECK(wrong_s == 0);
  CHECK(subnormal == 0);
}

TEST_CASE("an element's gelu does not depend on where it sits in the tensor") {
  // float64 shows any difference of the vector and a scalar erfc or exp in its last bits. 1037:
  // blocks of 256 and a last group of 1, 2 and 3 elements in the tensors' tails.
  xt::xarray<double> x = xt::linspace<double>(-40.0, 40.0, 1037) * 0.987654321;
  const xt::xarray<double> g = gelu_as(x), s = gelu_grad_as(x);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const xt::xarray<double> one = {x(i)};
    differ += gelu_as(one)(0) != g(i) || gelu_grad_as(one)(0) != s(i);
  }
  for (std::size_t n : {1, 2, 3, 5, 255, 257}) {  // tensors whose last element is x(n - 1)
    xt::xarray<double> head = xt::empty<double>(Shape{n});
    std::copy(x.data(), x.data() + n, head.data());
    differ += gelu_as(head)(n - 1) != g(n - 1) || gelu_grad_as(head)(n - 1) != s(n - 1);
  }
  CHECK(differ == 0);
}

TEST_CASE("gelu_backward_as is dg * gelu'(h) rounded as multiply_as rounds it, bit for bit") {
  const xt::xarray<float> h = xt::linspace<float>(-15.0f, 9.0f, 3001);
  const xt::xarray<float> dg = xt::sin(h * 7.0f) * 3.3f;
  const xt::xarray<float> want = multiply_as(dg, gelu_grad_as(h)), got = gelu_backward_as(dg, h);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < h.size(); ++i) differ += got(i) != want(i);
  CHECK(differ == 0);
  const xt::xarray<bfloat16> hb = converted<bfloat16>(h), db = converted<bfloat16>(dg);
  const xt::xarray<bfloat16> wb = multiply_as(db, gelu_grad_as(hb)), gb = gelu_backward_as(db, hb);
  for (std::size_t i = 0; i < h.size(); ++i) differ += gb(i).bits != wb(i).bits;
  CHECK(differ == 0);
  CHECK_THROWS(gelu_backward_as(dg, xt::xarray<float>(xt::zeros<float>({3}))));
}

namespace {

std::uint32_t bits_of(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Elements of gelu, gelu' and the backward in float32 that differ from the float64 path's results
// rounded by element_cast, over the last n elements of x and dg; `checked` counts the comparisons.
std::size_t float_path_differences(const xt::xarray<float>& x, const xt::xarray<float>& dg, std::size_t n,
                                   std::size_t& checked) {
  xt::xarray<float> xs = xt::empty<float>(Shape{n}), ds = xt::empty<float>(Shape{n});
  std::copy(x.data() + x.size() - n, x.data() + x.size(), xs.data());
  std::copy(dg.data() + dg.size() - n, dg.data() + dg.size(), ds.data());
  const xt::xarray<double> xd = converted<double>(xs);
  const xt::xarray<double> g64 = gelu_as(xd), s64 = gelu_grad_as(xd);
  const xt::xarray<float> g = gelu_as(xs), s = gelu_grad_as(xs), b = gelu_backward_as(ds, xs);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float want_s = element_cast<float>(s64(i));
    const float want_b = element_cast<float>(static_cast<double>(ds(i)) * static_cast<double>(want_s));
    differ += bits_of(g(i)) != bits_of(element_cast<float>(g64(i)));
    differ += bits_of(s(i)) != bits_of(want_s);
    differ += bits_of(b(i)) != bits_of(want_b);
    checked += 3;
  }
  return differ;
}

}  // namespace

TEST_CASE("float32 gelu, gelu' and the backward are the float64 path's results rounded once, bit for bit") {
  // The float32 path has code of its own (4 lanes in registers); the float64 path, rounded to
  // float32 by element_cast, is the function it must equal, signs of zero included. Through both
  // tails and zero, at sizes whose last 1-3 elements take the padded lanes; then around where
  // gelu and gelu' cross float32's smallest normal, with flush-to-zero off in this thread, where
  // only the code's own flush keeps subnormals out.
  const xt::xarray<float> x = xt::linspace<float>(-45.0f, 45.0f, 20011) * 0.987654f;
  const xt::xarray<float> dg = xt::sin(x * 5.0f) * 3.3f;
  std::size_t differ = 0, checked = 0;
  for (std::size_t n : {std::size_t(1), std::size_t(2), std::size_t(3), std::size_t(7), x.size()})
    differ += float_path_differences(x, dg, n, checked);
  CHECK(checked == 3 * (20011 + 13));
  CHECK(differ == 0);
  const xt::xarray<float> tail = xt::linspace<float>(-13.3f, -12.9f, 40001);
  const xt::xarray<float> ones = xt::ones<float>(tail.shape()) * 0.75f;
#if defined(__x86_64__)
  const unsigned int mxcsr = _mm_getcsr();
  _mm_setcsr(mxcsr & ~0x8040u);  // FTZ (bit 15) and DAZ (bit 6) off
#endif
  const std::size_t tail_differ = float_path_differences(tail, ones, tail.size(), checked);
#if defined(__x86_64__)
  _mm_setcsr(mxcsr);
#endif
  CHECK(tail_differ == 0);
}
