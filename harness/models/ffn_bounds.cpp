// Per-element bounds on |sharded - reference| for every tensor of the FFN.
//
// Notation: X_s is a tensor as the sharded run computed it, X_r as the unsharded reference did (both
// in element type t), E_X >= |X_s - X_r| elementwise the bound built here. u_t is t's unit roundoff,
// u_c that of the arithmetic it computes in (float32 for bfloat16), u' = u_t / (1 - u_t).
//
// 1. One contraction C = A B over k terms, where the sharded side adds the partial sums of a group
//    of P devices (gemm_rounding in verify.hpp):
//       |C_s - A_s B| <= rho_s |A_s| |B| + q |C_s|,   rho_s = gemm_rounding(t, k, P).product
//       |C_r - A_r B| <= rho_r |A_r| |B| + q |C_r|,   rho_r = gemm_rounding(t, k, 1).product
//    with q = u' for bfloat16 (its last rounding, relative to the result) and 0 otherwise. The
//    inputs x, W_in, W_out and dy are exactly what both sides hold, so B is the same on both sides;
//    A (g or dh) may differ by E_A, and |A_s| <= |A_r| + E_A. Then D = |C_s - C_r| satisfies
//       D <= E_A |B| + rho_s (|A_r| + E_A) |B| + rho_r |A_r| |B| + q (|C_r| + D) + q |C_r|,
//    that is
//       D <= ( [(1 + rho_s) E_A + (rho_s + rho_r) |A_r|] |B| + 2 q |C_r| ) / (1 - q).
//    The bracket is one nonnegative matrix, so the bound costs one float64 contraction on absolute
//    values per stage, next to the reference's own. (The contraction over B's side is the same
//    with the roles swapped: dW_in = x^T dh has its computed operand second.) The float64 sum of
//    nonnegative terms is itself within gamma_k(2^-53) of the exact one: it is scaled up by
//    (1 + (k + 4) 2^-52) to stay an upper bound, and an absolute 2 (k + P + 1) times the smallest
//    normal number of the compute type covers products and roundings that underflow.
// 2. Exact stages: x and dy are integers and W_in, W_out multiples of 1/8 (ffn_inputs), so every
//    partial sum of h = x W_in and dg = dy W_out^T is a whole number of eighths no larger than
//    (|A| |B|)_ij; while 8 (|A| |B|)_ij is below 1/u_t (2^8, 2^24, 2^53) both sides get that element
//    exactly, in any order, and its bound is 0. For bfloat16 the sums are often exact in float32
//    (8 (|A| |B|)_ij < 2^24) but not in bfloat16: then the local sums are exact and only the
//    bfloat16 roundings remain, gamma_k(u_c) = 0 in 1.; with no group adding partial sums both
//    sides round the same exact value once and the bound is 0 again (h at the article's dims).
// 3. g = gelu(h), each side rounding the compute-type value G^(h) once to t (only bfloat16 rounds:
//    float32 and float64 compute in their own type). If E_h = 0 the two sides read the same bits and
//    write the same bits: E_g = 0. Otherwise |gelu'| <= kGeluSlope, and G^ is within
//    eps(z) = 8 u_c |z| + tiny of gelu(z) (erf to a few ulps; its argument's rounding moves erf by at
//    most u_c max|z erf'(z)| < 0.5 u_c; the rest is three roundings of values below |z|), so
//       E_g = (kGeluSlope E_h + eps(|h_r| + E_h) + eps(|h_r|) + 2 r |g_r|) / (1 - r),
//    r = u' for bfloat16 and 0 otherwise.
// 4. dh = dg * s with s = gelu'(h) rounded to t (s_s = s_r when E_h = 0; otherwise
//    E_s = (kGeluCurve E_h + eps'(..) + eps'(..) + 2 r |s_r|) / (1 - r), eps'(z) = 8 u_c (1 + |z|) +
//    tiny), and the product rounded once to t on both sides:
//       E_dh = (E_dg (|s_r| + E_s) + |dg_r| E_s + 2 u' |dh_r|) / (1 - u'),  0 when E_dg = E_s = 0.
// 5. Stage by stage: h (exact or 1. without E), g (3.), y = g W_out (1. with E_g, k = H),
//    dg = dy W_out^T (exact or 1. without E, k = M), dW_out = g^T dy (1. with E_g, k = B S),
//    dh (4.), dx = dh W_in^T (1. with E_dh, k = H), dW_in = x^T dh (1. with E_dh second, k = B S).
// Every step is an inequality between real numbers (no term of second order is dropped), so the
// bounds hold for any summation order the BLAS or the collectives choose.
#include "harness/models/ffn_bounds.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "core/einsum.hpp"
#include "core/gelu.hpp"
#include "harness/check/verify.hpp"

namespace shardlab {

namespace {

template <class T>
Tensor abs_of(const xt::xarray<T>& t) {
  Tensor out = xt::empty<double>(t.shape());
  for (std::size_t i = 0; i < t.size(); ++i) out.data()[i] = std::fabs(element_cast<double>(t.data()[i]));
  return out;
}


// The last step of 1.: p = the bracket times |B| (or 2.'s sums), in place.
Tensor finish(Tensor p, const Tensor& abs_c, DType t, std::size_t k, std::size_t group) {
  const double q = gemm_rounding(t, k, group).result, up = 1 + static_cast<double>(k + 4) * DBL_EPSILON;
  const double tiny = 2.0 * static_cast<double>(k + group + 1) * smallest_normal(t);
  for (std::size_t i = 0; i < p.size(); ++i) p.data()[i] = ((p.data()[i] + 2 * q * abs_c.data()[i]) / (1 - q) + tiny) * up;
  return p;
}

// 1. above, for A (err_a) or B (err_b) computed with the given bound and the other an input.
Tensor contraction_bound(const std::string& eq, const Tensor& abs_a, const Tensor* err_a, const Tensor& abs_b,
                         const Tensor* err_b, const Tensor& abs_c, DType t, std::size_t k, std::size_t group) {
  const double rs = gemm_rounding(t, k, group).product, both = rs + gemm_rounding(t, k, 1).product;
  const Einsum e = Einsum::parse(eq);
  if (err_a) return finish(contract(e, Tensor((1 + rs) * *err_a + both * abs_a), abs_b), abs_c, t, k, group);
  return finish(contract(e, abs_a, Tensor((1 + rs) * *err_b + both * abs_b)), abs_c, t, k, group);
}

// 1. without a computed operand, or 2.: an element exact on the 1/8 grid gets 0; one whose sums are
// exact in the compute arithmetic only (bfloat16's float32) has no gamma_k part (terms = 0), and 0
// when no group adds partial sums (both sides round the same exact sum once).
Tensor input_contraction_bound(const std::string& eq, const Tensor& abs_a, const Tensor& abs_b, const Tensor& abs_c,
                               DType t, std::size_t k, std::size_t group) {
  const Tensor sums = contract(Einsum::parse(eq), abs_a, abs_b);
  const double both = gemm_rounding(t, k, group).product + gemm_rounding(t, k, 1).product;
  const double both_exact = gemm_rounding(t, 0, group).product;  // the reference's part is 0
  const Tensor bound = finish(Tensor(both * sums), abs_c, t, k, group);
  Tensor exact_sums = finish(Tensor(both_exact * sums), abs_c, t, k, group);
  for (std::size_t i = 0; i < sums.size(); ++i) {
    double& e = exact_sums.data()[i];
    if (exact_in_eighths(sums.data()[i], t) || (group == 1 && exact_in_eighths(sums.data()[i], t, true))) e = 0;
    else if (!exact_in_eighths(sums.data()[i], t, true)) e = bound.data()[i];
  }
  return exact_sums;
}

}  // namespace

bool exact_in_eighths(double abs_sum, DType t, bool in_compute) {
  return 8.0 * abs_sum < 1.0 / (in_compute ? compute_roundoff(t) : unit_roundoff(t));
}

FfnGroups ffn_reduction_groups(const FfnPlan& plan) {
  FfnGroups g;
  for (const auto& s : plan.stages) {
    if (s.kind != FfnStage::Kind::contraction) continue;
    std::size_t n = 1;
    for (const auto& st : s.plan.steps)
      if (st.kind == StepKind::reduce_scatter || st.kind == StepKind::all_reduce)
        n *= static_cast<std::size_t>(plan.mesh.axes_size(st.axes));
    // A result left as partial sums would be reduced later: count every device then.
    if (s.out_spec.is_partial()) n = static_cast<std::size_t>(plan.mesh.devices());
    std::size_t* slot = s.out == "h" ? &g.h : s.out == "y" ? &g.y : s.out == "dg" ? &g.dg
                        : s.out == "dW_out" ? &g.dw_out : s.out == "dx" ? &g.dx : s.out == "dW_in" ? &g.dw_in : nullptr;
    if (slot) *slot = std::max(*slot, n);
  }
  return g;
}

template <class T>
FfnBounds ffn_bounds(const FfnInputsOf<T>& in, const FfnReferenceOf<T>& ref, const FfnGroups& groups) {
  const DType t = dtype_of<T>();
  const double uc = compute_roundoff(t), up = unit_roundoff(t) / (1 - unit_roundoff(t));
  const double r = t == DType::bfloat16 ? up : 0.0, tiny = 2 * smallest_normal(t);
  const std::size_t m = in.w_in.shape()[0], hidden = in.w_in.shape()[1], bs = in.x.size() / m;
  auto eps = [&](double z) { return 8 * uc * z + tiny; };         // gelu, z = |h|
  auto eps_grad = [&](double z) { return 8 * uc * (1 + z) + tiny; };  // gelu'
  FfnBounds b;
  const Tensor x = abs_of(in.x), w_in = abs_of(in.w_in), w_out = abs_of(in.w_out);
  const Tensor h = abs_of(ref.h), g = abs_of(ref.g);
  b.h = input_contraction_bound("bsm,mh->bsh", x, w_in, h, t, m, groups.h);
  b.g = xt::zeros<double>(h.shape());
  for (std::size_t i = 0; i < h.size(); ++i) {
    const double eh = b.h.data()[i], zh = h.data()[i];
    if (eh > 0) b.g.data()[i] = (kGeluSlope * eh + eps(zh + eh) + eps(zh) + 2 * r * g.data()[i]) / (1 - r);
  }
  b.y = contraction_bound("bsh,hm->bsm", g, &b.g, w_out, nullptr, abs_of(ref.y), t, hidden, groups.y);
  if (ref.dh.dimension() == 0) return b;  // forward only: a default (0-d) array

  const Tensor dy = abs_of(in.r), dg = abs_of(ref.dg), dh = abs_of(ref.dh);
  b.dg = input_contraction_bound("bsm,hm->bsh", dy, w_out, dg, t, m, groups.dg);
  b.dw_out = contraction_bound("bsh,bsm->hm", g, &b.g, dy, nullptr, abs_of(ref.dw_out), t, bs, groups.dw_out);
  const Tensor s = abs_of(gelu_grad_as(ref.h));  // the reference's rounded gelu'(h)
  b.dh = xt::zeros<double>(h.shape());
  for (std::size_t i = 0; i < h.size(); ++i) {
    const double eh = b.h.data()[i], zh = h.data()[i], edg = b.dg.data()[i];
    const double es = eh > 0 ? (kGeluCurve * eh + eps_grad(zh + eh) + eps_grad(zh) + 2 * r * s.data()[i]) / (1 - r) : 0.0;
    if (edg > 0 || es > 0)
      b.dh.data()[i] = (edg * (s.data()[i] + es) + dg.data()[i] * es + 2 * up * dh.data()[i]) / (1 - up);
  }
  b.dx = contraction_bound("bsh,mh->bsm", dh, &b.dh, w_in, nullptr, abs_of(ref.dx), t, hidden, groups.dx);
  b.dw_in = contraction_bound("bsm,bsh->mh", x, nullptr, dh, &b.dh, abs_of(ref.dw_in), t, bs, groups.dw_in);
  return b;
}

template FfnBounds ffn_bounds<double>(const FfnInputsOf<double>&, const FfnReferenceOf<double>&, const FfnGroups&);
template FfnBounds ffn_bounds<float>(const FfnInputsOf<float>&, const FfnReferenceOf<float>&, const FfnGroups&);
template FfnBounds ffn_bounds<bfloat16>(const FfnInputsOf<bfloat16>&, const FfnReferenceOf<bfloat16>&,
                                        const FfnGroups&);

}  // namespace shardlab
