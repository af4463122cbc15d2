#include "harness/check/gradient_check.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include <xtensor/xview.hpp>

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
  double out_elements = 0, largest_r = 0, largest_sum = 0;
  for (const auto& kv : g.seeds) {
    out_elements += double(inputs.at(kv.second).size());
    largest_r = std::max(largest_r, double(xt::amax(xt::abs(inputs.at(kv.second)))()));
  }
  // Every forward tensor's magnitude counts: one that is large and cancels later (w + x - w)
  // rounds L by far more than L's own size shows.
  for (const auto& t : forward.tensors())
    largest_sum = std::max(largest_sum, double(xt::sum(xt::abs(analytic.values.at(t)))()));
  const double delta =
      DBL_EPSILON * (loss(forward, g, inputs).second + largest_sum * largest_r) * (out_elements + longest);

  std::vector<Verdict> out;
  for (const auto& [x, dx] : g.grads) {
    Tensor& t = inputs.at(x);
    const std::size_t n = t.size(), count = std::min(n, per_input);
    Tensor numeric = xt::zeros<double>({count}), want = xt::zeros<double>({count}), tol = xt::zeros<double>({count});
    double step = 0;
    std::size_t taken = 0, skipped = 0;
    // Evenly spaced elements; one whose step reaches a kink (relu at 0, a tie of max) is passed
    // over for the next: there the two one-sided differences disagree by the jump in slope.
    for (std::size_t c = 0; c < 4 * count && taken < count; ++c) {
      const std::size_t i = (c * n / count + c / count) % n;
      const double keep = t.data()[i];
      const double e = 1e-4 * std::max(1.0, std::abs(keep));
      auto at = [&](double h) {
        t.data()[i] = keep + h;
        const double l = loss(forward, g, inputs).first;
        t.data()[i] = keep;
        return l;
      };
      const double up = at(e), mid = at(0), down = at(-e), up2 = at(2 * e), down2 = at(-2 * e);
      const double d1 = (up - down) / (2 * e), d2 = (up2 - down2) / (4 * e);
      const double ahead = (up - mid) / e, behind = (mid - down) / e;
      if (std::abs(ahead - behind) > 1e-2 * (1 + std::abs(d1)) + 4 * delta / e) {
        ++skipped;
        continue;
      }
      numeric(taken) = d1;
      want(taken) = analytic.values.at(dx).data()[i];
      tol(taken) = std::abs(d2 - d1) + delta / e;
      step = e;
      ++taken;
    }
    const auto used = xt::view(numeric, xt::range(0, taken));
    Verdict v = compare(dx + " vs central differences", Tensor(xt::view(want, xt::range(0, taken))), Tensor(used),
                        Tensor(xt::view(tol, xt::range(0, taken))));
    v.name = dx + " vs central differences";
    v.floor = kFiniteDifferenceFloor;
    v.detail += (v.detail.empty() ? "" : "; ") + std::to_string(taken) + " of " + std::to_string(n) +
                " elements, float64, step " + format_number(step, "%.3g") +
                (skipped ? ", " + std::to_string(skipped) + " passed over (a kink within the step)" : "");
    out.push_back(v);
  }
  return out;
}

}  // namespace shardlab
