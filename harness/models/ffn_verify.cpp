// Verifying an FFN run: the full check and the sketch of each stage (harness/models/ffn_verify.hpp).
#include "harness/models/ffn_verify.hpp"

#include <cmath>

#include "core/blas.hpp"
#include "core/gelu.hpp"
#include "harness/check/sketch.hpp"
#include "harness/models/ffn_check.hpp"

namespace shardlab {

namespace {

template <class T>
double max_abs_of(const xt::xarray<T>& t) {
  double m = 0;
  for (std::size_t i = 0; i < t.size(); ++i) m = std::max(m, std::fabs(element_cast<double>(t.data()[i])));
  return m;
}



template <class T>
MatRef<float> as_float(const xt::xarray<T>& t, std::vector<xt::xarray<float>>& keep, std::size_t rows, bool transposed) {
  keep.push_back(converted<float>(t));
  return {keep.back().data(), rows, t.size() / rows, transposed};
}

// Sketch of one stage c = op(a) op(b), all held as [rows, cols] (a batch-and-sequence dim folded
// into rows), whose k-term sums were added over a group of `group` devices. Each element of an
// honest c is within rho (|op(A)| |op(B)|)_ij + q |c_ij| of the exact product (gemm_rounding in
// verify.hpp: the products in T's compute arithmetic, the partial sums added and rounded in T);
// sketch_product applies that to |v| row by row. `exact`: the stage's sums are exact on the 1/8 grid
// (ffn_check.hpp) in T, so rho = q = 0; `compute_exact`: in T's compute arithmetic, so only the
// roundings to T remain (gemm_rounding of 0 terms). kRows rows of c are also recomputed exactly
// and compared element by element with the same rho and q (check_rows, sketch.hpp); `one_in` is
// the fraction of rows (1/devices) whose miss probability the rows line prints.
template <class T>
Verdict sketch_stage(const std::string& name, const xt::xarray<T>& c, std::size_t c_rows, const xt::xarray<T>& a,
                     std::size_t a_rows, bool ta, const xt::xarray<T>& b, std::size_t b_rows, bool tb, std::size_t k,
                     std::size_t group, bool exact, std::uint64_t seed, std::size_t one_in, bool compute_exact = false) {
  constexpr std::size_t kVectors = 20;
  constexpr std::size_t kRows = 64;  // rows recomputed exactly (check_rows): 64/rows of the stage's GEMM, twice (A B and abs)
  const GemmRounding g = exact ? GemmRounding{} : gemm_rounding(dtype_of<T>(), compute_exact ? 0 : k, group);
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
    // float32: the row tolerance calibrated on rows recomputed as the plan sums them (sketch.hpp).
    const std::size_t calibrate = std::is_same_v<T, float> && !exact && !compute_exact ? group : 0;
    return sketch_product<T>(name, {c.data(), c_rows, c.size() / c_rows}, {a.data(), a_rows, a.size() / a_rows, ta},
                             {b.data(), b_rows, b.size() / b_rows, tb},
                             {.gamma = g.product, .result_gamma = g.result, .vectors = kVectors, .seed = seed,
                              .rows = kRows, .one_in = one_in, .calibrate_group = calibrate});
  } else {
    std::vector<xt::xarray<float>> keep;
    keep.reserve(3);
    const MatRef<float> fc = as_float(c, keep, c_rows, false), fa = as_float(a, keep, a_rows, ta),
                        fb = as_float(b, keep, b_rows, tb);
    return sketch_product<float>(name, fc, fa, fb,
                                 {.gamma = g.product, .result_gamma = g.result, .vectors = kVectors, .seed = seed,
                                  .rows = kRows, .one_in = one_in});
  }
}

template <class T>
Verdict exact_stage(const std::string& name, const xt::xarray<T>& got, const xt::xarray<T>& want) {
  Verdict v;
  v.name = name;
  v.detail = "every element, bit for bit (the same function in the same type on both sides)";
  v.power = 0;  // every element compared exactly: any wrong one fails
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double p = element_cast<double>(got.data()[i]), q = element_cast<double>(want.data()[i]);
    if (!(p == q) && !(std::isnan(p) && std::isnan(q))) {
      v.pass = false;
      v.max_abs_error = std::max(v.max_abs_error, std::fabs(p - q));
      if (v.detail.rfind("first", 0) != 0)
        v.detail = "first bad element " + std::to_string(i) + ": got " + shortest(p) + ", want " + shortest(q);
    }
  }
  return v;
}

}  // namespace

// Full verification: the unsharded layer as a program, checked as every program is
// (ffn_check.hpp: checked_reference's values and bounds, every element compared).
template <class T>
void verify_full(FfnResult& r, const FfnPlan& plan, const FfnInputsOf<T>& in, std::map<std::string, xt::xarray<T>>& got) {
  std::map<std::string, Tensor> inputs = {
      {"x", converted<double>(in.x)}, {"W_in", converted<double>(in.w_in)}, {"W_out", converted<double>(in.w_out)}};
  if (plan.config.backward) inputs["dy"] = converted<double>(in.r);
  std::map<std::string, Tensor> whole;
  for (const char* name : {"y", "dx", "dW_in", "dW_out"})
    if (got.count(name)) whole[name] = converted<double>(got.at(name));
  struct AllCores {  // back to one BLAS thread per device however the check ends
    AllCores() { use_all_blas_threads(); }
    ~AllCores() { use_one_blas_thread(); }
  };
  std::vector<Verdict> checks;
  {
    const AllCores cores;
    checks = ffn_full_checks(plan, inputs, whole);
  }
  for (auto& v : checks) r.checks.push_back(std::move(v));
}


// Sketch verification: each stage against its own (sharded, gathered) inputs.
template <class T>
void verify_sketch(FfnResult& r, const FfnPlan& plan, const FfnInputsOf<T>& in,
                   std::map<std::string, xt::xarray<T>>& got) {
  const FfnConfig& c = plan.config;
  const FfnDims& d = c.dims;
  const std::size_t bs = d.b * d.s;
  const FfnGroups n = ffn_reduction_groups(plan);
  // h and dg: exact in T when every element's sum of |terms| is (the 1/8 grid, ffn_check.hpp).
  const DType t = dtype_of<T>();
  const double h_sum = d.m * max_abs_of(in.x) * max_abs_of(in.w_in);
  const double dg_sum = c.backward ? d.m * max_abs_of(in.r) * max_abs_of(in.w_out) : 0.0;
  const bool grid = c.inputs.empty();  // a user's values are not on the grid of eighths
  const bool h_exact = grid && exact_in_eighths(h_sum, t), dg_exact = grid && c.backward && exact_in_eighths(dg_sum, t);
  const bool h_sums_exact = grid && exact_in_eighths(h_sum, t, true), dg_sums_exact = grid && exact_in_eighths(dg_sum, t, true);
  const std::uint64_t seed = c.seed * 7919 + 17;  // drawn before looking at any result
  // A wrong device block covers at least 1/devices of a result's rows: the rows line prints the
  // chance of missing an error that large.
  const std::size_t one_in = static_cast<std::size_t>(plan.mesh.devices());
  // The stages are independent checks: run them on every core.
  using Check = std::function<Verdict()>;
  std::vector<Check> checks = {
      [&] { return sketch_stage("h = x W_in (sketch)", got.at("h"), bs, in.x, bs, false, in.w_in, d.m, false, d.m, n.h, h_exact, seed, one_in, h_sums_exact); },
      [&] { return exact_stage("g = gelu(h) (every element)", got.at("g"), gelu_as(got.at("h"))); },
      [&] { return sketch_stage("y = g W_out (sketch)", got.at("y"), bs, got.at("g"), bs, false, in.w_out, d.h, false, d.h, n.y, false, seed + 1, one_in); }};
  if (c.backward) {
    checks.push_back([&] { return sketch_stage("dg = dy W_out^T (sketch)", got.at("dg"), bs, in.r, bs, false, in.w_out, d.h, true, d.m, n.dg, dg_exact, seed + 2, one_in, dg_sums_exact); });
    checks.push_back([&] { return sketch_stage("dW_out = g^T dy (sketch)", got.at("dW_out"), d.h, got.at("g"), bs, true, in.r, bs, false, bs, n.dw_out, false, seed + 3, one_in); });
    checks.push_back([&] { return exact_stage("dh = dg * gelu'(h) (every element)", got.at("dh"), gelu_backward_as(got.at("dg"), got.at("h"))); });
    checks.push_back([&] { return sketch_stage("dx = dh W_in^T (sketch)", got.at("dx"), bs, got.at("dh"), bs, false, in.w_in, d.m, true, d.h, n.dx, false, seed + 4, one_in); });
    checks.push_back([&] { return sketch_stage("dW_in = x^T dh (sketch)", got.at("dW_in"), d.m, in.x, bs, true, got.at("dh"), bs, false, bs, n.dw_in, false, seed + 5, one_in); });
  }
  std::vector<Verdict> verdicts = on_all_cores(checks);
  for (auto& v : verdicts) r.checks.push_back(std::move(v));
}

template void verify_full<double>(FfnResult&, const FfnPlan&, const FfnInputsOf<double>&,
                             std::map<std::string, xt::xarray<double>>&);
template void verify_full<float>(FfnResult&, const FfnPlan&, const FfnInputsOf<float>&,
                             std::map<std::string, xt::xarray<float>>&);
template void verify_full<bfloat16>(FfnResult&, const FfnPlan&, const FfnInputsOf<bfloat16>&,
                             std::map<std::string, xt::xarray<bfloat16>>&);
template void verify_sketch<double>(FfnResult&, const FfnPlan&, const FfnInputsOf<double>&,
                             std::map<std::string, xt::xarray<double>>&);
template void verify_sketch<float>(FfnResult&, const FfnPlan&, const FfnInputsOf<float>&,
                             std::map<std::string, xt::xarray<float>>&);
template void verify_sketch<bfloat16>(FfnResult&, const FfnPlan&, const FfnInputsOf<bfloat16>&,
                             std::map<std::string, xt::xarray<bfloat16>>&);

Verdict sketch_contraction(const std::string& name, const Tensor& c, const Tensor& a, const Tensor& b, std::size_t terms,
                           std::size_t group, DType t, std::uint64_t seed, std::size_t one_in) {
  const std::size_t c_rows = c.size() / c.shape().back(), a_rows = a.size() / a.shape().back(), b_rows = b.shape()[0];
  switch (t) {
    case DType::float32:
      return sketch_stage<float>(name, converted<float>(c), c_rows, converted<float>(a), a_rows, false,
                                 converted<float>(b), b_rows, false, terms, group, false, seed, one_in);
    case DType::bfloat16:
      return sketch_stage<bfloat16>(name, converted<bfloat16>(c), c_rows, converted<bfloat16>(a), a_rows, false,
                                    converted<bfloat16>(b), b_rows, false, terms, group, false, seed, one_in);
    default:
      return sketch_stage<double>(name, c, c_rows, a, a_rows, false, b, b_rows, false, terms, group, false, seed, one_in);
  }
}

}  // namespace shardlab
