#include "harness/models/ffn_spread.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include <xtensor/xmath.hpp>
#include <xtensor/xstrided_view.hpp>

#include "core/dtype.hpp"
#include "core/einsum.hpp"
#include "core/gelu.hpp"
#include "core/tensor.hpp"
#include "harness/check/program_check.hpp"

namespace shardlab {

namespace {

// x with only indices [lo, hi) of `axis` (a copy).
template <class T>
xt::xarray<T> slab(const xt::xarray<T>& x, std::size_t axis, std::size_t lo, std::size_t hi) {
  xt::xstrided_slice_vector sv(x.dimension(), xt::all());
  sv[axis] = xt::range(lo, hi);
  return xt::strided_view(x, sv);
}

// eq's contraction with the longest contracted letter cut in `chunks` blocks: each block's
// product in T (the kernel's own rounding), the blocks added in T one at a time, from the last
// when `reverse`.
template <class T>
xt::xarray<T> contract_in_blocks(const std::string& text, const xt::xarray<T>& a, const xt::xarray<T>& b,
                                 std::size_t chunks, bool reverse) {
  const Einsum eq = Einsum::parse(text);
  const std::string over = eq.contracted();
  char letter = over[0];
  for (char c : over)
    if (a.shape()[eq.a.find(c)] > a.shape()[eq.a.find(letter)]) letter = c;
  const std::size_t ax = eq.a.find(letter), bx = eq.b.find(letter), n = a.shape()[ax];
  chunks = std::max<std::size_t>(1, std::min(chunks, n));
  if (chunks == 1) return contract(eq, a, b);
  xt::xarray<double> acc;
  for (std::size_t q = 0; q < chunks; ++q) {
    const std::size_t k = reverse ? chunks - 1 - q : q, lo = n * k / chunks, hi = n * (k + 1) / chunks;
    const xt::xarray<double> part = converted<double>(contract(eq, slab(a, ax, lo, hi), slab(b, bx, lo, hi)));
    acc = q == 0 ? part : converted<double>(converted<T>(xt::xarray<double>(acc + part)));  // rounded in T
  }
  return converted<T>(acc);
}

std::size_t blocks(std::size_t group, int extra) {
  const std::size_t g = std::max<std::size_t>(2, group);
  return extra ? 2 * g + 1 : g;
}

template <class T>
double largest_move(const xt::xarray<T>& alt, const xt::xarray<T>& ref) {
  if (ref.size() == 0) return 0.0;
  const double d = xt::amax(xt::abs(converted<double>(alt) - converted<double>(ref)))();
  return std::isnan(d) ? INFINITY : d;
}

}  // namespace

template <class T>
FfnReferenceOf<T> ffn_reference_in_blocks(const FfnInputsOf<T>& in, bool backward, const FfnGroups& n, bool reverse,
                                          int extra) {
  FfnReferenceOf<T> r;
  r.h = contract_in_blocks("bsm,mh->bsh", in.x, in.w_in, blocks(n.h, extra), reverse);
  r.g = gelu_as(r.h);
  r.y = contract_in_blocks("bsh,hm->bsm", r.g, in.w_out, blocks(n.y, extra), reverse);
  if (!backward) return r;
  r.dg = contract_in_blocks("bsm,hm->bsh", in.r, in.w_out, blocks(n.dg, extra), reverse);
  r.dw_out = contract_in_blocks("bsh,bsm->hm", r.g, in.r, blocks(n.dw_out, extra), reverse);
  r.dh = multiply_as(r.dg, gelu_grad_as(r.h));
  r.dx = contract_in_blocks("bsh,mh->bsm", r.dh, in.w_in, blocks(n.dx, extra), reverse);
  r.dw_in = contract_in_blocks("bsm,bsh->mh", in.x, r.dh, blocks(n.dw_in, extra), reverse);
  return r;
}

template <class T>
void tighten_by_order_spread(FfnBounds& bounds, const FfnInputsOf<T>& in, const FfnReferenceOf<T>& ref,
                             const FfnGroups& groups, bool backward) {
  const FfnReferenceOf<T> one = ffn_reference_in_blocks(in, backward, groups, true, 0);
  const FfnReferenceOf<T> two = ffn_reference_in_blocks(in, backward, groups, false, 1);
  const double u = unit_roundoff(dtype_of<T>());
  auto tighten = [&](Tensor& bound, const xt::xarray<T>& r, const xt::xarray<T>& a, const xt::xarray<T>& b) {
    if (r.size() == 0) return;
    const double s = std::max(largest_move(a, r), largest_move(b, r));
    const double largest = xt::amax(xt::abs(converted<double>(r)))();
    if (!std::isfinite(s) || !std::isfinite(largest)) return;
    bound = xt::minimum(bound, kOrderSpreadFactor * s + 2 * u * largest);
  };
  tighten(bounds.h, ref.h, one.h, two.h);
  tighten(bounds.g, ref.g, one.g, two.g);
  tighten(bounds.y, ref.y, one.y, two.y);
  if (!backward) return;
  tighten(bounds.dg, ref.dg, one.dg, two.dg);
  tighten(bounds.dh, ref.dh, one.dh, two.dh);
  tighten(bounds.dx, ref.dx, one.dx, two.dx);
  tighten(bounds.dw_in, ref.dw_in, one.dw_in, two.dw_in);
  tighten(bounds.dw_out, ref.dw_out, one.dw_out, two.dw_out);
}

#define SHARDLAB_FFN_SPREAD(T)                                                                                      \
  template FfnReferenceOf<T> ffn_reference_in_blocks<T>(const FfnInputsOf<T>&, bool, const FfnGroups&, bool, int); \
  template void tighten_by_order_spread<T>(FfnBounds&, const FfnInputsOf<T>&, const FfnReferenceOf<T>&,            \
                                           const FfnGroups&, bool);
SHARDLAB_FFN_SPREAD(double)
SHARDLAB_FFN_SPREAD(float)
SHARDLAB_FFN_SPREAD(bfloat16)
#undef SHARDLAB_FFN_SPREAD

}  // namespace shardlab
