// Running the FFN plan: inputs, the unsharded reference, finite differences, the SPMD program,
// the checks, and the text and JSON pieces of a report.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <map>
#include <sstream>

#include <xtensor/xmath.hpp>

#include "collectives/collectives.hpp"
#include "core/error.hpp"
#include "core/gelu.hpp"
#include "core/layout.hpp"
#include "harness/ffn.hpp"
#include "harness/session.hpp"
#include "harness/table.hpp"

namespace shardlab {

namespace {

double max_abs(const Tensor& t) { return t.size() ? xt::amax(xt::abs(t))() : 0.0; }

Tensor forward_y(const Tensor& x, const Tensor& w_in, const Tensor& w_out) {
  return contract(Einsum::parse("bsh,hm->bsm"), gelu(contract(Einsum::parse("bsm,mh->bsh"), x, w_in)), w_out);
}

std::string num(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

}  // namespace

FfnInputs ffn_inputs(const FfnDims& d, std::uint64_t seed) {
  FfnInputs in;
  in.x = random_integers({d.b, d.s, d.m}, seed, -2, 2);
  in.w_in = random_integers({d.m, d.h}, seed + 1, -2, 2) / 8.0;
  in.w_out = random_integers({d.h, d.m}, seed + 2, -2, 2) / 8.0;
  in.r = random_integers({d.b, d.s, d.m}, seed + 3, -2, 2);
  return in;
}

double ffn_loss(const Tensor& x, const Tensor& w_in, const Tensor& w_out, const Tensor& r) {
  return xt::sum(forward_y(x, w_in, w_out) * r)();
}

FfnReference ffn_reference(const FfnInputs& in, bool backward) {
  FfnReference ref;
  ref.h = contract(Einsum::parse("bsm,mh->bsh"), in.x, in.w_in);
  ref.g = gelu(ref.h);
  ref.y = contract(Einsum::parse("bsh,hm->bsm"), ref.g, in.w_out);
  if (!backward) return ref;
  ref.dg = contract(Einsum::parse("bsm,hm->bsh"), in.r, in.w_out);
  ref.dw_out = contract(Einsum::parse("bsh,bsm->hm"), ref.g, in.r);
  ref.dh = ref.dg * gelu_grad(ref.h);
  ref.dx = contract(Einsum::parse("bsh,mh->bsm"), ref.dh, in.w_in);
  ref.dw_in = contract(Einsum::parse("bsm,bsh->mh"), in.x, ref.dh);
  return ref;
}

// Central differences D = (L(t + e) - L(t - e)) / 2e against the analytic gradient.
// Error of D = truncation + rounding:
//  - truncation <= e^2/6 * |d3L/dt3|. L depends on x and W_in through gelu(h), h = x W_in, so
//    d3L/dx[b,s,m]^3 = sum_h dg[b,s,h] gelu'''(h[b,s,h]) W_in[m,h]^3, at most H * max|dg| * max|W_in|^3
//    since |gelu'''(z)| = |z phi(z) (z^2 - 4)| < 0.8 < 1; for W_in[m,h] the sum runs over B*S with
//    x^3 in place of W_in^3. L is linear in W_out: no truncation error there.
//  - rounding: each evaluation of L is a sum over B*S*M of y*R, each y a sum over H, so it is off by
//    at most delta = B*S*M * max|R| * reduction_tolerance(H, max|g W_out|) + reduction_tolerance(B*S*M,
//    max|y R|) (reduction_tolerance bounds two orderings, so it bounds one sum too, generously);
//    the difference of two evaluations divided by 2e is off by at most delta / e.
// e is chosen to balance the two bounds, e = (3 delta / K3)^(1/3), and the tolerance is their sum.
std::vector<Verdict> finite_difference_checks(const FfnInputs& in, const FfnReference& ref,
                                              std::size_t max_per_tensor) {
  const double bsm = static_cast<double>(in.x.size());
  const std::size_t h_len = in.w_in.shape()[1], bs = in.x.shape()[0] * in.x.shape()[1];
  const double delta =
      bsm * max_abs(in.r) * reduction_tolerance(h_len, max_abs(ref.g) * max_abs(in.w_out)) +
      reduction_tolerance(in.x.size(), max_abs(ref.y) * max_abs(in.r)) + DBL_EPSILON * std::fabs(xt::sum(ref.y * in.r)());
  const double dg = max_abs(ref.dg);
  struct Param {
    const char* name;
    const Tensor* analytic;
    double k3;
    int which;
  };
  const Param params[] = {
      {"dx vs central differences", &ref.dx, h_len * dg * std::pow(max_abs(in.w_in), 3), 0},
      {"dW_in vs central differences", &ref.dw_in, bs * dg * std::pow(max_abs(in.x), 3), 1},
      {"dW_out vs central differences", &ref.dw_out, 0.0, 2},
  };
  std::vector<Verdict> out;
  for (const auto& p : params) {
    const double e = p.k3 > 0 ? std::cbrt(3 * delta / p.k3) : 1.0;
    const double tol = e * e / 6 * p.k3 + delta / e;
    Tensor x = in.x, w_in = in.w_in, w_out = in.w_out;
    Tensor& t = p.which == 0 ? x : p.which == 1 ? w_in : w_out;
    const std::size_t n = t.size(), count = std::min(n, max_per_tensor);
    Tensor numeric = xt::zeros<double>(t.shape()), analytic = xt::zeros<double>(t.shape());
    Verdict v;
    v.name = p.name;
    v.tolerance = tol;
    for (std::size_t k = 0; k < count; ++k) {
      const std::size_t i = k * n / count;
      const double keep = t.data()[i];
      t.data()[i] = keep + e;
      const double up = ffn_loss(x, w_in, w_out, in.r);
      t.data()[i] = keep - e;
      const double down = ffn_loss(x, w_in, w_out, in.r);
      t.data()[i] = keep;
      numeric.data()[i] = (up - down) / (2 * e);
      analytic.data()[i] = p.analytic->data()[i];
    }
    v = compare(p.name, analytic, numeric, tol);
    v.detail += (v.detail.empty() ? "" : "; ") + std::to_string(count) + " of " + std::to_string(n) +
                " elements, step " + num(e);
    out.push_back(v);
  }
  return out;
}

Program ffn_program(const FfnPlan& plan, const FfnInputs& in) {
  return [&plan, &in](Device& dev) -> Outputs {
    const Mesh& mesh = dev.mesh();
    const int id = dev.id();
    std::map<std::string, Tensor> held;  // this device's live blocks, by tensor name
    held["x"] = local_block(in.x, mesh, plan.specs.x, id);
    held["W_in"] = local_block(in.w_in, mesh, plan.specs.w_in, id);
    held["W_out"] = local_block(in.w_out, mesh, plan.specs.w_out, id);
    if (plan.config.backward) held["dy"] = local_block(in.r, mesh, plan.specs.y, id);

    // Memory: the bytes of every block this device holds, read from the tensors themselves at each
    // stage boundary; while a contraction or reshard runs, plus its transient buffers (gathered
    // operands, the product and each step's new buffer: execute_plan keeps them until it returns),
    // whose sizes the plan's steps give. Elementwise stages count their new tensors as measured.
    auto live = [&held] {
      std::size_t n = 0;
      for (const auto& kv : held) n += kv.second.size() * sizeof(double);
      return n;
    };
    std::size_t stored = live(), peak = stored;
    for (const auto& s : plan.stages) {
      const std::size_t before = live();
      switch (s.kind) {
        case FfnStage::Kind::reshard: {
          peak = std::max(peak, before + s.extra_bytes);
          Tensor t = held.at(s.out);
          for (const auto& st : s.steps) {
            if (st.kind == StepKind::all_gather) {
              t = all_gather(dev, t, st.axes, static_cast<std::size_t>(st.dim), st.tensor);
            } else {  // the block of this device's block along the new axes: a copy, no messages
              Spec more = Spec::replicated(t.dimension());
              more.dims[static_cast<std::size_t>(st.dim)] = st.axes;
              t = local_block(t, mesh, more, id);
            }
          }
          held[s.out] = std::move(t);
          break;
        }
        case FfnStage::Kind::contraction:
          peak = std::max(peak, before + s.extra_bytes);
          held[s.out] = execute_plan(dev, s.plan, held.at(s.in[0]), held.at(s.in[1]));
          break;
        case FfnStage::Kind::gelu:
          held[s.out] = gelu(held.at("h"));
          peak = std::max(peak, live());
          break;
        case FfnStage::Kind::gelu_backward: {
          const Tensor slope = gelu_grad(held.at("h"));
          held[s.out] = held.at("dg") * slope;
          peak = std::max(peak, live() + slope.size() * sizeof(double));
          break;
        }
      }
      for (const auto& t : s.frees) held.erase(t);
      stored = std::max(stored, live());
    }
    Outputs out;
    for (const char* name : {"y", "dx", "dW_in", "dW_out"})
      if (held.count(name)) out[name] = held.at(name);
    out["peak_bytes"] = Tensor({static_cast<double>(peak)});
    out["stored_bytes"] = Tensor({static_cast<double>(stored)});
    return out;
  };
}

bool FfnResult::pass() const {
  if (checks.empty()) return false;
  for (const auto& c : checks)
    if (!c.pass) return false;
  for (const auto& c : collectives)
    if (!c.matches()) return false;
  return true;
}

namespace {

// Tolerances of the sharded results against the reference (see verify.hpp's reduction_tolerance):
//  - h = x W_in is exact in any order (integers times multiples of 1/8, far below 2^53), so g is
//    the same number on both sides, and y differs only by the order of its sum over H.
//  - dg sums M products; dh = dg * gelu'(h) multiplies equal slopes by dg's that differ by at most
//    tol_dg, so err_dh <= max|gelu'| tol_dg + DBL_EPSILON max|dh| (one rounding per side).
//  - dx sums H terms dh W_in whose dh differ by err_dh: H max|W_in| err_dh + the reordering of the
//    sum; dW_in likewise over B*S with x; dW_out sums B*S products of equal numbers g and R.
struct Tolerances {
  double y = 0, dx = 0, dw_in = 0, dw_out = 0;
};
Tolerances tolerances(const FfnInputs& in, const FfnReference& ref, const FfnDims& d) {
  Tolerances t;
  const double g = max_abs(ref.g), wi = max_abs(in.w_in), wo = max_abs(in.w_out), r = max_abs(in.r);
  t.y = reduction_tolerance(d.h, g * wo);
  if (ref.dh.size() == 0) return t;
  const double dh = max_abs(ref.dh), x = max_abs(in.x);
  const double err_dh = max_abs(gelu_grad(ref.h)) * reduction_tolerance(d.m, r * wo) + DBL_EPSILON * dh;
  t.dx = d.h * wi * err_dh + reduction_tolerance(d.h, dh * wi);
  t.dw_in = d.b * d.s * x * err_dh + reduction_tolerance(d.b * d.s, x * dh);
  t.dw_out = reduction_tolerance(d.b * d.s, g * r);
  return t;
}

Tensor perturbed(const Tensor& want, bool perturb) {
  Tensor w = want;
  if (perturb && w.size() > 0) w.data()[w.size() / 2] += 1.0;
  return w;
}

std::size_t largest(const RunResult& run, const std::string& name) {
  double m = 0;
  for (const auto& o : run.outputs) {
    auto it = o.find(name);
    if (it != o.end() && it->second.size()) m = std::max(m, it->second.data()[0]);
  }
  return static_cast<std::size_t>(m);
}

FfnResult check_ffn(const FfnPlan& plan, const FfnInputs& in, const RunResult& run, bool root) {
  FfnResult r;
  r.plan = plan;
  r.forward_collectives = plan.collectives(FfnPhase::forward).size();
  if (!root) return r;
  r.collectives = summarize(run.ledger);
  r.bytes_per_device = largest_device_total(run.ledger);
  r.peak_bytes_per_device = largest(run, "peak_bytes");
  r.stored_bytes_per_device = largest(run, "stored_bytes");

  const FfnConfig& c = plan.config;
  const FfnReference ref = ffn_reference(in, c.backward);
  const Tolerances tol = tolerances(in, ref, c.dims);
  const Mesh& mesh = plan.mesh;
  const FfnSpecs& f = plan.specs;
  auto check = [&](const std::string& name, const Spec& spec, const Tensor& want, double t, const std::string& label) {
    Verdict v = verify_output(mesh, spec, run, name, perturbed(want, c.perturb_expected), t);
    v.name = label;
    r.checks.push_back(v);
  };
  check("y", f.y, ref.y, tol.y, "y vs unsharded");
  if (c.backward) {
    check("dx", f.x, ref.dx, tol.dx, "dx vs unsharded analytic");
    check("dW_in", f.w_in, ref.dw_in, tol.dw_in, "dW_in vs unsharded analytic");
    check("dW_out", f.w_out, ref.dw_out, tol.dw_out, "dW_out vs unsharded analytic");
    // Each central difference runs the whole layer twice; keep it to small layers.
    if (c.finite_differences && plan.unsharded_flops() <= 2e6)
      for (const auto& v : finite_difference_checks(in, ref)) r.checks.push_back(v);
  }
  // The run's collectives are the plan's, in order, with the predicted bytes.
  Verdict agree;
  agree.name = "collectives as planned";
  agree.detail = ffn_plan_vs_ledger(plan, r.collectives);
  agree.pass = agree.detail.empty();
  r.checks.push_back(agree);
  Verdict memory;
  memory.name = "memory as planned";
  memory.pass = r.peak_bytes_per_device == plan.peak_bytes_per_device &&
                r.stored_bytes_per_device == plan.stored_bytes_per_device;
  if (!memory.pass)
    memory.detail = "devices held at most " + std::to_string(r.stored_bytes_per_device) + " bytes (peak " +
                    std::to_string(r.peak_bytes_per_device) + "); the plan says " +
                    std::to_string(plan.stored_bytes_per_device) + " (peak " +
                    std::to_string(plan.peak_bytes_per_device) + ")";
  r.checks.push_back(memory);
  return r;
}

}  // namespace

std::string ffn_plan_vs_ledger(const FfnPlan& plan, const std::vector<CollectiveSummary>& run) {
  Plan all;
  for (const auto& s : plan.stages) {
    const auto& steps = s.kind == FfnStage::Kind::contraction ? s.plan.steps : s.steps;
    all.steps.insert(all.steps.end(), steps.begin(), steps.end());
  }
  return plan_vs_ledger(all, run);
}

FfnResult run_ffn(Runtime& runtime, const Mesh& mesh, const FfnConfig& config) {
  const FfnPlan plan = plan_ffn(mesh, config);
  const FfnInputs in = ffn_inputs(config.dims, config.seed);
  const RunResult run = runtime.run(mesh, ffn_program(plan, in));
  return check_ffn(plan, in, run, runtime.is_root());
}

FfnResult run_ffn(Session& session, const FfnConfig& config) {
  const FfnPlan plan = plan_ffn(session.mesh(), config);
  const FfnInputs in = ffn_inputs(config.dims, config.seed);
  const RunResult run = session.run(ffn_program(plan, in));
  FfnResult r = check_ffn(plan, in, run, session.runtime().is_root());
  auto& checks = session.report().checks;
  checks.insert(checks.end(), r.checks.begin(), r.checks.end());
  return r;
}

std::string ffn_collectives_table(const FfnResult& r) {
  if (r.collectives.empty()) return "  no collectives: 0 bytes moved between devices\n";
  Table t({"#", "pass", "collective", "over", "tensor", "group", "bytes/device", "predicted", "match"});
  for (std::size_t i = 0; i < r.collectives.size(); ++i) {
    const auto& c = r.collectives[i];
    t.add({std::to_string(i + 1), i < r.forward_collectives ? "forward" : "backward", c.op, c.axes, c.tensor,
           std::to_string(c.group_size), std::to_string(c.bytes_per_device) + (c.modeled ? "*" : ""),
           std::to_string(c.predicted_bytes_per_device), c.matches() ? (c.modeled ? "modeled" : "yes") : "NO"});
  }
  return t.text();
}

std::string ffn_memory_text(const FfnResult& r) {
  const FfnPlan& p = r.plan;
  const int n = p.mesh.devices();
  auto ratio = [](double a, double b) { return b > 0 ? num(std::round(a / b * 1000) / 1000) : "-"; };
  std::ostringstream o;
  o << "  memory per device: held " << human_bytes(static_cast<double>(r.stored_bytes_per_device)) << ", peak "
    << human_bytes(static_cast<double>(r.peak_bytes_per_device)) << " with the short-lived gathered copies\n"
    << "  unsharded layer:   held " << human_bytes(static_cast<double>(p.unsharded_stored_bytes)) << ", peak "
    << human_bytes(static_cast<double>(p.unsharded_peak_bytes)) << "; per device / unsharded = "
    << ratio(static_cast<double>(r.stored_bytes_per_device), static_cast<double>(p.unsharded_stored_bytes))
    << " held, " << ratio(static_cast<double>(r.peak_bytes_per_device), static_cast<double>(p.unsharded_peak_bytes))
    << " peak (1/" << n << " = " << ratio(1, n) << ")\n"
    << "  FLOPs per device:  " << num(p.flops_per_device()) << " of " << num(p.unsharded_flops()) << " unsharded = 1/"
    << num(p.unsharded_flops() / p.flops_per_device()) << " of the matmul work"
    << (p.flops_per_device() * n == p.unsharded_flops() ? " (every device a unique share)" : " (some work repeated)")
    << "\n";
  return o.str();
}

void ffn_report_fields(const FfnResult& r, Report& report) {
  const FfnPlan& p = r.plan;
  report.strings["strategy"] = p.strategy.name;
  report.strings["dims"] = ffn_dims_text(p.config.dims);
  report.strings["forward"] = ffn_collectives_summary(p, FfnPhase::forward);
  if (p.config.backward) report.strings["backward"] = ffn_collectives_summary(p, FfnPhase::backward);
  report.numbers["forward_collectives"] = static_cast<double>(r.forward_collectives);
  report.numbers["backward_collectives"] = static_cast<double>(p.collectives(FfnPhase::backward).size());
  report.numbers["predicted_bytes_per_device"] = static_cast<double>(p.predicted_bytes_per_device());
  report.numbers["peak_memory_per_device"] = static_cast<double>(r.peak_bytes_per_device);
  report.numbers["stored_memory_per_device"] = static_cast<double>(r.stored_bytes_per_device);
  report.numbers["unsharded_peak_memory"] = static_cast<double>(p.unsharded_peak_bytes);
  report.numbers["unsharded_stored_memory"] = static_cast<double>(p.unsharded_stored_bytes);
  report.numbers["flops_per_device"] = p.flops_per_device();
  report.numbers["unsharded_flops"] = p.unsharded_flops();
}

}  // namespace shardlab
