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

// The largest |alt - ref| over the elements (NaN: infinite), without a temporary the size of ref.
template <class T>
double largest_move(const xt::xarray<T>& alt, const xt::xarray<T>& ref) {
  double d = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double e = std::fabs(element_cast<double>(alt.data()[i]) - element_cast<double>(ref.data()[i]));
    d = std::isnan(e) ? INFINITY : std::max(d, e);
  }
  return d;
}

template <class T>
double largest_abs(const xt::xarray<T>& x) {
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(element_cast<double>(x.data()[i])));
  return m;
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
  // One other order at a time, so only one more unsharded layer is held at once.
  const xt::xarray<T>* r[8] = {&ref.h, &ref.g, &ref.y, &ref.dg, &ref.dh, &ref.dx, &ref.dw_in, &ref.dw_out};
  const int tensors = backward ? 8 : 3;  // h, g, y first: a forward-only reference has no more
  double spread[8] = {};
  for (int k = 0; k < 2; ++k) {
    const FfnReferenceOf<T> alt = ffn_reference_in_blocks(in, backward, groups, k == 0, k);
    const xt::xarray<T>* a[8] = {&alt.h, &alt.g, &alt.y, &alt.dg, &alt.dh, &alt.dx, &alt.dw_in, &alt.dw_out};
    for (int t = 0; t < tensors; ++t) spread[t] = std::max(spread[t], largest_move(*a[t], *r[t]));
  }
  const double u = unit_roundoff(dtype_of<T>());
  Tensor* b[8] = {&bounds.h, &bounds.g, &bounds.y, &bounds.dg, &bounds.dh, &bounds.dx, &bounds.dw_in, &bounds.dw_out};
  for (int t = 0; t < tensors; ++t) {
    if (r[t]->size() == 0) continue;
    const double largest = largest_abs(*r[t]);
    if (!std::isfinite(spread[t]) || !std::isfinite(largest)) continue;
    *b[t] = xt::minimum(*b[t], kOrderSpreadFactor * spread[t] + 2 * u * largest);
  }
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
