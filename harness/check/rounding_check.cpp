#include "harness/check/rounding_check.hpp"

#include <cfloat>
#include <cmath>

#include "core/einsum.hpp"
#include "core/text.hpp"

namespace shardlab {

namespace {

Tensor magnitude(const Tensor& v) { return xt::abs(v); }

// How many elements of `got` lie within `tol` of `want`; the largest |got - want| / tol.
struct Fit {
  std::size_t outside = 0, elements = 0;
  double worst = 0;
};
void fit(Fit& f, const Tensor& got, const Tensor& want, const Tensor& tol) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(got.data()[i] - want.data()[i]), t = tol.data()[i];
    const double ratio = err == 0 ? 0 : t > 0 ? err / t : INFINITY;
    f.worst = std::fmax(f.worst, ratio);
    f.outside += ratio > 1 ? 1 : 0;
  }
  f.elements += got.size();
}

}  // namespace

Verdict rounding_check(const TensorProgram& p, const ProgramReference& ref, DType t) {
  Verdict v;
  if (t != DType::bfloat16) return v;
  const double u = unit_roundoff(t), L = smallest_normal(t);
  Fit f;
  std::string first_bad;
  for (const auto& op : p.ops) {
    const bool elementwise = op.kind == OpKind::binary && (op.name == "add" || op.name == "sub" || op.name == "mul");
    if (op.kind != OpKind::einsum && !elementwise) continue;
    const Tensor& got = ref.values.at(op.out);
    const Tensor exact = op_value(p, op, ref.values, DType::float64);
    Tensor tol;
    if (op.kind == OpKind::einsum) {
      const Einsum eq = Einsum::parse(op.eq);
      std::size_t terms = 1;
      for (char c : eq.contracted()) terms *= p.sizes.at(c);
      const Tensor mag = contract(eq, magnitude(ref.values.at(op.in[0])), magnitude(ref.values.at(op.in[1])),
                                  DType::float64);
      const GemmRounding g = gemm_rounding(t, terms);
      tol = (g.product + double(terms) * DBL_EPSILON) * mag + g.result * magnitude(got) + g.absolute;
    } else {
      tol = u / (1 - u) * magnitude(got) + L;
    }
    const std::size_t before = f.outside;
    fit(f, got, exact, tol);
    if (before == 0 && f.outside > 0) first_bad = op.out + " (" + op.name + ")";
  }
  if (f.elements == 0) return v;
  v.name = kRoundingCheck;
  v.claim = "catches an element off by more than one rounding";
  v.pass = f.outside == 0;
  v.detail = v.pass ? std::to_string(f.elements) + " elements within one rounding to nearest (worst " +
                          format_number(f.worst, "%.2g") + " x the bound)"
                    : std::to_string(f.outside) + " of " + std::to_string(f.elements) +
                          " elements off by more than one rounding to nearest, first in " + first_bad +
                          " (worst " + format_number(f.worst, "%.3g") + " x the bound): a conversion to bfloat16 "
                          "that does not round to nearest";
  return v;
}

}  // namespace shardlab
