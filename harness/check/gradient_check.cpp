#include "harness/check/gradient_check.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "core/einsum.hpp"
#include "core/text.hpp"
#include "harness/check/program_check.hpp"

namespace shardlab {

namespace {

// Multiply-adds of one run of the program, and the longest sum it makes (a contraction's or a
// reduction's terms).
std::pair<double, double> work_of(const TensorProgram& p) {
  double flops = 0, longest = 1;
  for (const auto& op : p.ops) {
    double out = 1, terms = 1;
    for (char c : p.dims.at(op.out)) out *= double(p.sizes.at(c));
    if (op.kind == OpKind::einsum)
      for (char c : Einsum::parse(op.eq).contracted()) terms *= double(p.sizes.at(c));
    if (op.kind == OpKind::reduce || op.kind == OpKind::softmax)
      for (char c : op.over) terms *= double(p.sizes.at(c));
    flops += out * terms;
    longest = std::max(longest, terms);
  }
  return {flops, longest};
}

// L = sum over outputs of sum(y * R_y), and sum |y * R_y|.
std::pair<double, double> loss(const TensorProgram& forward, const GradientProgram& g,
                               std::map<std::string, Tensor>& inputs) {
  const ProgramReference r = run_reference(forward, inputs, DType::float64, 1);
  double l = 0, magnitude = 0;
  for (const auto& [y, dy] : g.seeds) {
    const Tensor prod = r.values.at(y) * inputs.at(dy);
    l += xt::sum(prod)();
    magnitude += xt::sum(xt::abs(prod))();
  }
  return {l, magnitude};
}

}  // namespace

std::vector<Verdict> central_difference_checks(const TensorProgram& forward, const GradientProgram& g,
                                               std::uint64_t seed, std::size_t per_input, double max_flops) {
  const auto [flops, longest] = work_of(forward);
  if (flops > max_flops) return {};
  std::map<std::string, Tensor> inputs;
  std::uint64_t k = 0;
  for (const auto& [name, dims] : g.program.inputs)
    inputs[name] = random_uniform(g.program.shape(name), seed * 1000 + 500 + k++, -1.0, 1.0);
  const ProgramReference analytic = run_reference(g.program, inputs, DType::float64, 1);
  double out_elements = 0;
  for (const auto& kv : g.seeds) out_elements += double(inputs.at(kv.second).size());
  const double delta = DBL_EPSILON * loss(forward, g, inputs).second * (out_elements + longest);

  std::vector<Verdict> out;
  for (const auto& [x, dx] : g.grads) {
    Tensor& t = inputs.at(x);
    const std::size_t n = t.size(), count = std::min(n, per_input);
    Tensor numeric = xt::zeros<double>({count}), want = xt::zeros<double>({count}), tol = xt::zeros<double>({count});
    double step = 0;
    for (std::size_t j = 0; j < count; ++j) {
      const std::size_t i = j * n / count;
      const double keep = t.data()[i];
      const double e = 1e-4 * std::max(1.0, std::abs(keep));
      auto difference = [&](double h) {
        t.data()[i] = keep + h;
        const double up = loss(forward, g, inputs).first;
        t.data()[i] = keep - h;
        const double down = loss(forward, g, inputs).first;
        t.data()[i] = keep;
        return (up - down) / (2 * h);
      };
      const double d1 = difference(e), d2 = difference(2 * e);
      numeric(j) = d1;
      want(j) = analytic.values.at(dx).data()[i];
      tol(j) = std::abs(d2 - d1) + delta / e;
      step = e;
    }
    Verdict v = compare(dx + " vs central differences", want, numeric, tol);
    v.name = dx + " vs central differences";
    v.detail += (v.detail.empty() ? "" : "; ") + std::to_string(count) + " of " + std::to_string(n) +
                " elements, float64, step " + format_number(step, "%.3g");
    out.push_back(v);
  }
  return out;
}

}  // namespace shardlab
