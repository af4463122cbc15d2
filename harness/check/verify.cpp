#include "harness/check/verify.hpp"

#include <algorithm>

#include <cfloat>
#include <cmath>
#include <iomanip>
#include <vector>
#include <sstream>

#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/text.hpp"
#include "harness/check/sketch.hpp"

namespace shardlab {

std::string power_phrase(const Verdict& v) {
  if (v.replayed) return "exact by replay";
  if (v.tolerance == 0 && v.claim.empty()) return "exact, no tolerance";
  if (v.power == 0) return "exact, no tolerance";
  if (v.power > 0) return "catches " + format_number(v.power, "%.2g") + " x RMS";
  if (!v.claim.empty()) return v.claim;
  return "power not measured";  // a tolerance and no power: a check that forgot to say (tests look for this)
}

std::string power_cell(const Verdict& v) {
  const std::string phrase = power_phrase(v);
  if (phrase == "exact, no tolerance") return "exact";
  return phrase.rfind("catches ", 0) == 0 && v.claim.empty() ? phrase.substr(8) : phrase;
}

std::string Verdict::line() const {
  std::ostringstream out;
  out << std::setprecision(3);  // three digits say how close; a lesson's line stays under 100 columns
  out << (pass ? "PASS " : "FAIL ");
  if (overflow) return out.str() + "overflow: " + detail;
  // A check with nothing to show but its verdict (a count, a list, an exact match): its power alone.
  if (max_abs_error == 0 && tolerance == 0 && worst_ratio < 0)
    return out.str() + "(" + power_phrase(*this) + ")" + (detail.empty() ? "" : "; " + detail);
  out << "max_abs_err=" << max_abs_error << " (" << power_phrase(*this);
  if (worst_ratio >= 0)
    out << "; worst err/tol " << worst_ratio << ", tol per element up to " << tolerance;
  else if (tolerance != 0) out << "; tol " << tolerance;
  out << ")";
  if (!detail.empty()) out << "; " << detail;
  return out.str();
}

namespace {
std::string index_text(const Shape& shape, std::size_t flat) {
  std::vector<std::size_t> idx(shape.size());
  for (std::size_t i = shape.size(); i-- > 0;) {
    idx[i] = flat % shape[i];
    flat /= shape[i];
  }
  return shape_text(Shape(idx.begin(), idx.end()));
}

// An element of want or got that is inf or NaN: the computation left the type's range, and an
// error or a tolerance of it means nothing. Fills v's verdict and returns true.
bool overflowed(Verdict& v, const Tensor& got, const Tensor& want) {
  const Tensor* sides[2] = {&want, &got};
  for (int s = 0; s < 2; ++s)
    for (std::size_t i = 0; i < sides[s]->size(); ++i) {
      const double x = sides[s]->data()[i];
      if (std::isfinite(x)) continue;
      std::ostringstream d;
      d << std::setprecision(3) << (s == 0 ? "the reference" : "the sharded run") << " holds " << x
        << " at " << index_text(shape_of(want), i) << " (" << (s == 0 ? "run " : "reference ")
        << sides[1 - s]->data()[i] << "); the values left the element type's range, so no tolerance can judge them";
      v.pass = false;
      v.overflow = true;
      v.detail = d.str();
      v.power = -1;
      return true;
    }
  return false;
}
}  // namespace

double power_floor(DType t) {
  switch (t) {
    case DType::float64: return 1e-9;
    case DType::float32: return 1e-3;
    case DType::bfloat16: return 3e-2;
  }
  return 0;
}

double floor_for(const Verdict& v, DType t) { return v.floor >= 0 ? v.floor : power_floor(t); }

// A failed check caught something: its power is moot.
bool is_weak(const Verdict& v, DType t) { return v.pass && v.power >= 0 && !(v.power <= floor_for(v, t)); }

void cover_by_replays(std::vector<Verdict>& checks, const std::vector<ReplayRecord>& replays) {
  if (replays.empty()) return;
  Verdict r;
  r.name = kReplayCheck;
  std::size_t tensors = 0, elements = 0;
  bool blind = false;  // a run that returned no values (its results went elsewhere): nothing covered
  for (const auto& rec : replays) {
    tensors += rec.tensors;
    elements += rec.elements;
    blind = blind || rec.elements == 0;
    if (!rec.identical && r.pass) {
      r.pass = false;
      r.detail = "run " + std::to_string(&rec - replays.data() + 1) + " differs from its replay: " + rec.detail;
    }
  }
  // Runs whose results did not come back as outputs (a sink) compared nothing: no claim either way.
  if (r.pass && blind) return;
  r.power = r.pass ? 0.0 : -1.0;
  r.tol_over_value_median = r.tol_over_value_max = 0;
  if (r.pass)
    r.detail = std::to_string(replays.size()) + " run" + (replays.size() == 1 ? "" : "s") + ", " +
               std::to_string(tensors) + " blocks, " + std::to_string(elements) + " elements bit for bit";
  bool had = false;
  for (auto& v : checks)
    if (v.name == kReplayCheck) {
      v = r;
      had = true;
    }
  if (!had) checks.push_back(r);
  if (!r.pass) return;
  for (auto& v : checks)
    if (v.name != kReplayCheck && !v.replayed && v.power >= 0 && v.floor < 0) {
      v.replayed = true;
      v.rounding_power = v.power;
      v.power = 0;
    }
}

std::string weak_text(const Verdict& v, DType t) {
  std::ostringstream out;
  out << std::setprecision(2) << "WEAK: sure to catch only an element off by " << v.power << " x RMS; floor "
      << floor_for(v, t);
  return out.str();
}

namespace {
// Fills v's power and tolerance/value figures; tol(i) is element i's tolerance (got and want have
// one shape: compare() checked it).
template <class Tol>
void measure_power(Verdict& v, const Tensor& got, const Tensor& want, const Tol& tol) {
  const std::size_t n = want.size();
  double sum_sq = 0, guaranteed = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double w = want.data()[i], err = std::fabs(got.data()[i] - w);
    if (std::isfinite(w)) sum_sq += w * w;
    guaranteed = std::max(guaranteed, tol(i) + (std::isfinite(err) ? err : 0.0));
  }
  const double rms = n ? std::sqrt(sum_sq / static_cast<double>(n)) : 0.0;
  v.power = guaranteed == 0 ? 0.0 : rms > 0 ? guaranteed / rms : INFINITY;
  const std::size_t stride = std::max<std::size_t>(1, n >> 20);
  std::vector<double> rel;
  rel.reserve(n / stride + 1);
  for (std::size_t i = 0; i < n; i += stride) {
    const double w = std::fabs(want.data()[i]);
    if (w > 0 && std::isfinite(w)) rel.push_back(tol(i) / w);
  }
  if (rel.empty()) return;
  auto mid = rel.begin() + static_cast<long>(rel.size() / 2);
  std::nth_element(rel.begin(), mid, rel.end());
  v.tol_over_value_median = *mid;
  v.tol_over_value_max = *std::max_element(rel.begin(), rel.end());
}
}  // namespace

void absorb(Verdict& whole, const Verdict& part, const std::string& label) {
  // The whole is as weak as its weakest part.
  whole.power = std::max(whole.power, part.power);
  whole.tol_over_value_median = std::max(whole.tol_over_value_median, part.tol_over_value_median);
  whole.tol_over_value_max = std::max(whole.tol_over_value_max, part.tol_over_value_max);
  whole.pass = whole.pass && part.pass;
  whole.overflow = whole.overflow || part.overflow;
  whole.max_abs_error = std::max(whole.max_abs_error, part.max_abs_error);
  whole.tolerance = std::max(whole.tolerance, part.tolerance);
  if (!part.pass && whole.detail.empty()) whole.detail = label + ": " + part.detail;
}

Verdict compare(const std::string& name, const Tensor& got, const Tensor& want, double tolerance) {
  Verdict v;
  v.name = name;
  v.tolerance = tolerance;
  if (shape_of(got) != shape_of(want)) {
    v.pass = false;
    v.max_abs_error = INFINITY;
    v.detail = name + " has shape " + shape_text(shape_of(got)) + ", expected " + shape_text(shape_of(want));
    return v;
  }
  bool first = true;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got.data()[i], w = want.data()[i];
    // Equal values (infinities of one sign too) differ by 0; a NaN against a number by infinity.
    const double err = g == w ? 0.0 : std::isnan(g) != std::isnan(w) ? INFINITY : std::fabs(g - w);
    if (err > v.max_abs_error || std::isnan(err)) v.max_abs_error = err;
    if ((err > tolerance || std::isnan(err)) && first) {
      std::ostringstream d;
      d << "first bad index " << index_text(shape_of(want), i) << ": got " << g << ", want " << w;
      v.detail = d.str();
      v.pass = false;
      first = false;
    }
  }
  measure_power(v, got, want, [&](std::size_t) { return tolerance; });
  overflowed(v, got, want);
  return v;
}

Verdict compare(const std::string& name, const Tensor& got, const Tensor& want, const Tensor& tolerance) {
  if (shape_of(tolerance) != shape_of(want))
    throw Error(ErrorKind::rank_mismatch, "tolerances of " + name + " have shape " + shape_text(shape_of(tolerance)) +
                                              ", the values " + shape_text(shape_of(want)));
  if (shape_of(got) != shape_of(want)) return compare(name, got, want, 0.0);  // names both shapes
  Verdict v;
  v.name = name;
  v.worst_ratio = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got.data()[i], w = want.data()[i], tol = tolerance.data()[i];
    // Equal values (infinities of one sign too) differ by 0; a NaN against a number by infinity.
    const double err = g == w ? 0.0 : std::isnan(g) != std::isnan(w) ? INFINITY : std::fabs(g - w);
    if (err > v.max_abs_error || std::isnan(err)) v.max_abs_error = err;
    v.tolerance = std::max(v.tolerance, tol);
    const double ratio = err == 0 ? 0.0 : tol > 0 ? err / tol : INFINITY;
    if (ratio > v.worst_ratio || std::isnan(ratio)) v.worst_ratio = std::isnan(ratio) ? INFINITY : ratio;
    // A NaN against a number fails whatever the tolerance (even an unknown, infinite one).
    if ((!(err <= tol) || std::isnan(g) != std::isnan(w)) && v.pass) {
      std::ostringstream d;
      d << "first bad index " << index_text(shape_of(want), i) << ": got " << g << ", want " << w << ", tol " << tol;
      v.detail = d.str();
      v.pass = false;
    }
  }
  measure_power(v, got, want, [&](std::size_t i) { return tolerance.data()[i]; });
  overflowed(v, got, want);
  return v;
}

GemmRounding gemm_rounding(DType t, std::size_t terms, std::size_t group) {
  const double uc = compute_roundoff(t), ut = unit_roundoff(t);
  const std::size_t adds = group > 0 ? group - 1 : 0;
  GemmRounding r;
  if (uc == ut) {
    r.product = sum_gamma(terms + adds, ut);
  } else {
    const double gc = sum_gamma(terms, uc), gt = sum_gamma(adds, ut);
    r.product = gc + gt + gc * gt;
    r.result = ut / (1 - ut);
  }
  r.absolute = double(2 * terms + (group > 0 ? group : 1)) * smallest_normal(t) * (1 + r.product + r.result);
  return r;
}

double reduction_tolerance(std::size_t terms, double max_abs_term) {
  if (terms <= 1) return 0.0;
  const double n = static_cast<double>(terms);
  return (n - 1) * DBL_EPSILON * n * max_abs_term;
}

double reduction_tolerance(std::size_t terms, double max_abs_term, DType t, int devices) {
  if (t == DType::float64) return reduction_tolerance(terms, max_abs_term);
  if (terms == 0) return 0.0;
  const double n = static_cast<double>(terms);
  // Plus each side's flushes (core/dtype.hpp): at most one per product and per rounding, each
  // below the smallest normal.
  return 2 * (n * compute_roundoff(t) + (devices + 1) * unit_roundoff(t)) * n * max_abs_term +
         2 * (2 * n + devices + 1) * smallest_normal(t);
}

double integer_sum_tolerance(std::size_t terms, double max_abs_term, DType t, int devices) {
  // 1/u is 2^53, 2^24, 2^8: every integer up to it is exact (one bit more than the significand).
  if (static_cast<double>(terms) * max_abs_term <= 1.0 / unit_roundoff(t)) return 0.0;
  return reduction_tolerance(terms, max_abs_term, t, devices);
}

namespace {

template <class Tol>
Verdict verify_stitched(const Mesh& mesh, const Spec& spec, const RunResult& run, const std::string& name,
                        const Tensor& want, const Tol& tolerance) {
  std::vector<Tensor> blocks;
  for (const auto& out : run.outputs) {
    auto it = out.find(name);
    if (it == out.end())
      throw Error(ErrorKind::device, "a device returned no block named " + name + " to verify");
    blocks.push_back(it->second);
  }
  Assembly a = assemble(mesh, spec, shape_of(want), blocks, name);
  Verdict v = compare(name, a.tensor, want, tolerance);
  if (!a.replicas_agree) {
    v.pass = false;
    v.detail = a.disagreement + (v.detail.empty() ? "" : "; " + v.detail);
  }
  return v;
}

}  // namespace

Verdict verify_output(const Mesh& mesh, const Spec& spec, const RunResult& run, const std::string& name,
                      const Tensor& want, double tolerance) {
  return verify_stitched(mesh, spec, run, name, want, tolerance);
}

Verdict verify_output(const Mesh& mesh, const Spec& spec, const RunResult& run, const std::string& name,
                      const Tensor& want, const Tensor& tolerance) {
  return verify_stitched(mesh, spec, run, name, want, tolerance);
}

}  // namespace shardlab
