// The FFN strategies (data) and plan_ffn: stages derived from the specs by the planner.
#include "harness/models/ffn.hpp"

#include <algorithm>
#include <cctype>
#include <map>

#include "core/memory.hpp"
#include "collectives/predict.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/text.hpp"
#include "core/table.hpp"
#include "harness/plan/uneven_steps.hpp"

namespace shardlab {

// Placeholder axes: X, Y on two-axis meshes; Y the only axis of one-axis meshes; D every axis.
// x_in / g_in left empty: the tensor is used as held.
const std::vector<FfnStrategy>& ffn_strategies() {
  static const std::vector<FfnStrategy> all = {
      {"gspmd", "2D layout: batch over X, embed and hidden over Y, both weights over X and Y", "articles 001, 002",
       2, "batch->X,hidden->Y,heads->Y,embed_kernel->X,embed->Y", "", "", "", "", "", "", ""},
      {"column", "both matmuls column-wise: weights split by columns, each output gathered", "article 003", 1, "",
       "_,_,_", "", "_,Y", "_,_,_", "", "_,Y", "_,_,_"},
      {"row", "both matmuls row-wise: inputs sliced by columns, weights by rows, each output all-reduced",
       "article 003", 1, "", "_,_,_", "_,_,Y", "Y,_", "_,_,_", "_,_,Y", "Y,_", "_,_,_"},
      {"pairwise", "Megatron: W_in by columns, W_out by rows; hidden stays split, one AllReduce", "article 003", 1,
       "", "_,_,_", "", "_,Y", "_,_,Y", "", "Y,_", "_,_,_"},
      {"row_column", "W_in by rows (AllReduce, GELU on the full sum), then W_out by columns (AllGather)",
       "article 003", 1, "", "_,_,_", "_,_,Y", "Y,_", "_,_,_", "", "_,Y", "_,_,_"},
      {"data", "data parallel: batch split over every mesh axis, weights replicated", "article 003", 0, "", "D,_,_", "",
       "_,_", "D,_,_", "", "_,_", "D,_,_"},
  };
  return all;
}

std::string ffn_default_mesh(const FfnStrategy& s, int line) {
  if (s.mesh_axes == 2) return "X=2,Y=4";
  return (s.mesh_axes == 1 ? "Y=" : "X=") + std::to_string(line);
}

std::string ffn_strategy_names() {
  std::vector<std::string> names;
  for (const auto& s : ffn_strategies()) names.push_back(s.name);
  return join(names, "|");
}

const FfnStrategy& ffn_strategy(const std::string& name) {
  for (const auto& s : ffn_strategies())
    if (s.name == name) return s;
  throw Error(ErrorKind::parse, "strategy '" + name + "' is not known; choose one of " + ffn_strategy_names());
}

std::vector<FfnLogical> ffn_logical_names() {
  return {{"x", {"batch", "seq", "embed"}},
          {"W_in", {"embed_kernel", "hidden"}},
          {"h", {"batch", "seq", "hidden"}},
          {"W_out", {"hidden", "embed_kernel"}},
          {"y", {"batch", "seq", "embed"}}};
}

FfnDims article_ffn_dims() { return {8, 512, 5120, 20480}; }

FfnDims parse_ffn_dims(const std::string& text) {
  if (trim(text) == "article") return article_ffn_dims();
  std::string lower;
  for (char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  FfnDims d;
  for (const auto& [letter, size] : parse_dim_sizes(lower)) {
    switch (letter) {
      case 'b': d.b = size; break;
      case 's': d.s = size; break;
      case 'm': d.m = size; break;
      case 'h': d.h = size; break;
      default:
        throw Error(ErrorKind::parse, std::string("--dims has letter ") +
                                          static_cast<char>(std::toupper(static_cast<unsigned char>(letter))) +
                                          "; the FFN's dims are B (batch), S (sequence), M (embed), H (hidden)");
    }
  }
  return d;
}

std::string ffn_dims_text(const FfnDims& d) {
  return "B=" + std::to_string(d.b) + ",S=" + std::to_string(d.s) + ",M=" + std::to_string(d.m) +
         ",H=" + std::to_string(d.h);
}

std::string phase_name(FfnPhase p) { return p == FfnPhase::forward ? "forward" : "backward"; }

namespace {

using Axes = std::vector<std::string>;

// The placeholder axes of a strategy, each mapped to the mesh axes it stands for.
std::map<std::string, Axes> placeholders(const FfnStrategy& s, const Mesh& mesh) {
  const auto& n = mesh.names();
  if (s.mesh_axes == 2) return {{"X", {n[0]}}, {"Y", {n[1]}}};
  if (s.mesh_axes == 1) return {{"Y", {n[0]}}};
  return {{"D", n}};
}

void check_mesh_rank(const FfnStrategy& s, const Mesh& mesh) {
  if (s.mesh_axes == 0 || mesh.rank() == s.mesh_axes) return;
  const std::string want = s.mesh_axes == 1 ? "a one-axis mesh such as Y=4" : "a two-axis mesh such as X=2,Y=4";
  throw Error(ErrorKind::parse, "strategy " + s.name + " runs on " + want + "; mesh " + mesh.text() + " has " +
                                    std::to_string(mesh.rank()) + (mesh.rank() == 1 ? " axis" : " axes"));
}

Spec on_mesh(const std::string& text, const std::map<std::string, Axes>& axes) {
  Spec spec = Spec::parse(text);
  for (auto& dim : spec.dims) {
    Axes renamed;
    for (const auto& a : dim) {
      auto it = axes.find(a);
      if (it == axes.end()) renamed.push_back(a);
      else renamed.insert(renamed.end(), it->second.begin(), it->second.end());
    }
    dim = renamed;
  }
  return spec;
}

Shape shape_x(const FfnDims& d) { return {d.b, d.s, d.m}; }
Shape shape_h(const FfnDims& d) { return {d.b, d.s, d.h}; }

// The gathers, then the free slices, that take a tensor from `from` to `to` (no partial sums).
std::vector<PlanStep> reshard_steps(const Mesh& mesh, const std::string& label, const Spec& from, const Spec& to,
                                    const Shape& shape, std::size_t eb) {
  std::vector<PlanStep> steps;
  Spec cur = from;
  auto add = [&](StepKind kind, std::size_t d, const Axes& axes, const std::string& reason) {
    PlanStep s;
    s.kind = kind;
    s.tensor = label;
    s.axes = axes;
    s.dim = static_cast<int>(d);
    s.before = cur;
    s.global = shape;
    s.local_before = local_shape(mesh, cur, shape);
    if (kind == StepKind::all_gather) cur.dims[d].resize(cur.dims[d].size() - axes.size());
    else cur.dims[d].insert(cur.dims[d].end(), axes.begin(), axes.end());
    s.after = cur;
    s.local_after = local_shape(mesh, cur, shape);
    if (s.communicates() && step_is_uneven(mesh, kind, s.dim, s.to_dim, s.before, s.after, shape))
      s.predicted_bytes = uneven_step_bytes(mesh, kind, axes, s.dim, s.to_dim, s.before, s.after, shape, eb);
    else if (s.communicates())
      s.predicted_bytes = predicted_bytes_sent("all_gather", mesh.axes_size(axes), bytes_of(s.local_before, eb), eb);
    s.reason = reason;
    steps.push_back(s);
  };
  for (std::size_t d = 0; d < to.rank(); ++d) {
    const Axes& have = cur.dims[d];
    std::size_t keep = 0;
    while (keep < have.size() && keep < to.dims[d].size() && have[keep] == to.dims[d][keep]) ++keep;
    if (keep < have.size())
      add(StepKind::all_gather, d, Axes(have.begin() + static_cast<long>(keep), have.end()),
          "the next use wants dim " + std::to_string(d) + " split as " + to.text() + ": gather the rest");
  }
  for (std::size_t d = 0; d < to.rank(); ++d) {
    const Axes& have = cur.dims[d];
    if (have.size() < to.dims[d].size())
      add(StepKind::local_slice, d, Axes(to.dims[d].begin() + static_cast<long>(have.size()), to.dims[d].end()),
          "the next use splits dim " + std::to_string(d) + " further: keep this device's slice, no messages");
  }
  return steps;
}

// Extra bytes a device holds while a plan runs, beyond the operands it already holds: execute_plan
// keeps each gathered operand until it returns, and a result step holds its old and new buffers.
std::size_t plan_extra_bytes(const Plan& plan) {
  const std::size_t eb = plan.element_bytes;
  std::size_t temp[3] = {0, 0, 0}, peak = 0;
  for (const auto& s : plan.steps) {
    const int o = s.kind == StepKind::contract ? 2 : s.operand;
    const std::size_t fresh = bytes_of(s.local_after, eb);
    peak = std::max(peak, temp[0] + temp[1] + temp[2] + fresh);
    temp[o] = fresh;
  }
  return peak;
}

std::size_t reshard_extra_bytes(const std::vector<PlanStep>& steps, std::size_t eb) {
  std::size_t peak = 0;
  for (std::size_t i = 0; i < steps.size(); ++i)
    peak = std::max(peak, bytes_of(steps[i].local_after, eb) + (i > 0 ? bytes_of(steps[i].local_before, eb) : 0));
  return peak;
}

struct Held {
  Spec spec;
  Shape shape;
};

// Builds the stages in program order, tracking the spec each tensor is held in.
struct StageBuilder {
  const Mesh& mesh;
  std::size_t eb;  // bytes per element
  std::map<std::string, Held> held;
  std::vector<FfnStage> stages;
  FfnPhase phase = FfnPhase::forward;

  void reshard(const std::string& name, const Spec& to) {
    Held& t = held.at(name);
    if (t.spec == to) return;
    FfnStage s;
    s.kind = FfnStage::Kind::reshard;
    s.phase = phase;
    s.title = "reshard " + name + ": " + t.spec.text() + " -> " + to.text();
    s.in = {name};
    s.out = name;
    s.steps = reshard_steps(mesh, name, t.spec, to, t.shape, eb);
    s.out_spec = to;
    s.out_shape = t.shape;
    s.extra_bytes = reshard_extra_bytes(s.steps, eb);
    t.spec = to;
    stages.push_back(s);
  }

  // `cheapest`: try both rule-2 choices and keep the plan with fewer bytes per device.
  const Plan& contract(const std::string& title, const std::string& eq, const std::string& a, const std::string& b,
                       const std::string& result, const Spec& out, bool cheapest) {
    const Einsum e = Einsum::parse(eq);
    const Operand oa{a, held.at(a).spec, held.at(a).shape}, ob{b, held.at(b).spec, held.at(b).shape};
    Plan plan = plan_contraction(e, mesh, oa, ob, out, {false, result, eb});
    if (cheapest) {
      Plan other = plan_contraction(e, mesh, oa, ob, out, {true, result, eb});
      if (other.predicted_bytes_per_device() < plan.predicted_bytes_per_device()) plan = other;
    }
    FfnStage s;
    s.kind = FfnStage::Kind::contraction;
    s.phase = phase;
    s.title = title;
    s.in = {a, b};
    s.out = result;
    s.out_spec = plan.out_spec;
    s.out_shape = plan.out_shape;
    s.extra_bytes = plan_extra_bytes(plan);
    s.plan = std::move(plan);
    held[result] = {s.out_spec, s.out_shape};
    stages.push_back(std::move(s));
    return stages.back().plan;
  }

  void elementwise(FfnStage::Kind kind, const std::string& title, const std::vector<std::string>& in,
                   const std::string& out) {
    FfnStage s;
    s.kind = kind;
    s.phase = phase;
    s.title = title;
    s.in = in;
    s.out = out;
    s.out_spec = held.at(in.back()).spec;
    s.out_shape = held.at(in.back()).shape;
    // The new tensor only: gelu_backward computes gelu'(h) block by block (core/gelu.hpp).
    s.extra_bytes = bytes_of(local_shape(mesh, s.out_spec, s.out_shape), eb);
    held[out] = {s.out_spec, s.out_shape};
    stages.push_back(s);
  }
};

Spec summed(Spec s) {
  s.partial.clear();
  return s;
}

// Fills each stage's `frees` and the plan's memory figures. `local` gives a held tensor's bytes
// per device; the unsharded layer uses whole tensors and only a new result as transient.
void account_memory(FfnPlan& p, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs) {
  std::map<std::string, std::size_t> last_read;
  for (std::size_t i = 0; i < p.stages.size(); ++i)
    for (const auto& t : p.stages[i].in) last_read[t] = i;
  for (const auto& [t, i] : last_read)
    if (std::find(outputs.begin(), outputs.end(), t) == outputs.end()) p.stages[i].frees.push_back(t);

  const Mesh& mesh = p.mesh;
  const std::size_t eb = element_bytes(p.config.dtype);
  std::map<std::string, Held> held;
  const FfnDims& d = p.config.dims;
  held["x"] = {p.specs.x, shape_x(d)};
  held["W_in"] = {p.specs.w_in, {d.m, d.h}};
  held["W_out"] = {p.specs.w_out, {d.h, d.m}};
  if (p.config.backward) held["dy"] = {p.specs.y, shape_x(d)};
  std::map<std::string, std::size_t> live, whole;
  for (const auto& t : inputs) {
    live[t] = bytes_of(local_shape(mesh, held.at(t).spec, held.at(t).shape), eb);
    whole[t] = bytes_of(held.at(t).shape, eb);
  }
  auto total = [](const std::map<std::string, std::size_t>& m) {
    std::size_t n = 0;
    for (const auto& kv : m) n += kv.second;
    return n;
  };
  p.stored_bytes_per_device = p.peak_bytes_per_device = total(live);
  p.unsharded_stored_bytes = p.unsharded_peak_bytes = total(whole);
  for (const auto& s : p.stages) {
    p.peak_bytes_per_device = std::max(p.peak_bytes_per_device, total(live) + s.extra_bytes);
    if (s.kind != FfnStage::Kind::reshard) {
      const std::size_t out = bytes_of(s.out_shape, eb);
      const std::size_t extra = s.kind == FfnStage::Kind::gelu_backward ? 2 * out : out;
      p.unsharded_peak_bytes = std::max(p.unsharded_peak_bytes, total(whole) + extra);
      whole[s.out] = out;
    }
    live[s.out] = bytes_of(local_shape(mesh, s.out_spec, s.out_shape), eb);
    for (const auto& t : s.frees) {
      live.erase(t);
      whole.erase(t);
    }
    p.stored_bytes_per_device = std::max(p.stored_bytes_per_device, total(live));
    p.unsharded_stored_bytes = std::max(p.unsharded_stored_bytes, total(whole));
  }
}

}  // namespace

AxisMapping ffn_rules(const FfnStrategy& s, const Mesh& mesh) {
  if (s.rules.empty()) return {};
  check_mesh_rank(s, mesh);
  const auto axes = placeholders(s, mesh);
  AxisMapping m = parse_mapping(s.rules);
  for (auto& [logical, axis] : m) axis = axes.at(axis).front();
  return m;
}

FfnSpecs ffn_specs(const FfnStrategy& s, const Mesh& mesh, const FfnDims& d) {
  check_mesh_rank(s, mesh);
  FfnSpecs f;
  const Shape sx = shape_x(d), sh = shape_h(d), win{d.m, d.h}, wout{d.h, d.m};
  if (!s.rules.empty()) {
    const AxisMapping rules = ffn_rules(s, mesh);
    const auto names = ffn_logical_names();
    f.x = spec_from_mapping(names[0].dims, rules, mesh, "x", sx);
    f.w_in = spec_from_mapping(names[1].dims, rules, mesh, "W_in", win);
    f.h = spec_from_mapping(names[2].dims, rules, mesh, "h", sh);
    f.w_out = spec_from_mapping(names[3].dims, rules, mesh, "W_out", wout);
    f.y = spec_from_mapping(names[4].dims, rules, mesh, "y", sx);
    f.x_in = f.x;
    f.g_in = f.h;
  } else {
    const auto axes = placeholders(s, mesh);
    f.x = on_mesh(s.x, axes);
    f.x_in = s.x_in.empty() ? f.x : on_mesh(s.x_in, axes);
    f.w_in = on_mesh(s.w_in, axes);
    f.h = on_mesh(s.h, axes);
    f.g_in = s.g_in.empty() ? f.h : on_mesh(s.g_in, axes);
    f.w_out = on_mesh(s.w_out, axes);
    f.y = on_mesh(s.y, axes);
  }
  f.x.validate(mesh, sx, "x");
  f.x_in.validate(mesh, sx, "x");
  f.w_in.validate(mesh, win, "W_in");
  f.h.validate(mesh, sh, "h");
  f.g_in.validate(mesh, sh, "g");
  f.w_out.validate(mesh, wout, "W_out");
  f.y.validate(mesh, sx, "y");
  return f;
}

std::vector<const PlanStep*> FfnStage::collectives() const {
  if (kind == Kind::contraction) return plan.collectives();
  std::vector<const PlanStep*> out;
  for (const auto& s : steps)
    if (s.communicates()) out.push_back(&s);
  return out;
}

std::size_t FfnStage::predicted_bytes() const {
  std::size_t n = 0;
  for (const PlanStep* s : collectives()) n += s->predicted_bytes;
  return n;
}

std::vector<const PlanStep*> FfnPlan::collectives(FfnPhase phase) const {
  std::vector<const PlanStep*> out;
  for (const auto& s : stages)
    if (s.phase == phase)
      for (const PlanStep* c : s.collectives()) out.push_back(c);
  return out;
}

std::vector<const PlanStep*> FfnPlan::collectives() const {
  auto out = collectives(FfnPhase::forward);
  for (const PlanStep* c : collectives(FfnPhase::backward)) out.push_back(c);
  return out;
}

std::size_t FfnPlan::predicted_bytes_per_device(FfnPhase phase) const {
  std::size_t n = 0;
  for (const PlanStep* s : collectives(phase)) n += s->predicted_bytes;
  return n;
}

std::size_t FfnPlan::predicted_bytes_per_device() const {
  return predicted_bytes_per_device(FfnPhase::forward) + predicted_bytes_per_device(FfnPhase::backward);
}

double FfnPlan::flops_per_device() const {
  double f = 0;
  for (const auto& s : stages)
    if (s.kind == FfnStage::Kind::contraction) f += s.plan.flops_per_device();
  return f;
}

double FfnPlan::unsharded_flops() const {
  double f = 0;
  for (const auto& s : stages)
    if (s.kind == FfnStage::Kind::contraction) f += s.plan.unsharded_flops();
  return f;
}

void refuse_ffn_over_memory(const FfnPlan& p, const FfnConfig& config, int devices_here) {
  const double widen = 8.0 / static_cast<double>(element_bytes(config.dtype));
  refuse_if_over_memory(devices_here * static_cast<double>(p.peak_bytes_per_device) +
                            widen * static_cast<double>(p.unsharded_stored_bytes),
                        "this run", "see its plan with shardlab ffn --plan-only, or give smaller --dims");
}

FfnPlan plan_ffn(const Mesh& mesh, const FfnConfig& config) {
  // The sketch's bfloat16 bounds are far above the 3e-2 floor (a WEAK check fails): refused, as in lesson 09.
  if (config.verify == "sketch" && config.dtype == DType::bfloat16)
    throw Error(ErrorKind::parse, "--verify sketch checks float32 and float64 runs; in bfloat16 its bounds cannot reach "
                                  "the 3e-2 floor, so use --verify full (or auto) with --dtype bfloat16");
  FfnPlan p;
  p.config = config;
  p.strategy = ffn_strategy(config.strategy);
  p.mesh = mesh;
  p.specs = ffn_specs(p.strategy, mesh, config.dims);
  const FfnDims& d = config.dims;
  const FfnSpecs& f = p.specs;

  StageBuilder b{mesh, element_bytes(config.dtype), {}, {}, FfnPhase::forward};
  b.held["x"] = {f.x, shape_x(d)};
  b.held["W_in"] = {f.w_in, {d.m, d.h}};
  b.held["W_out"] = {f.w_out, {d.h, d.m}};
  b.reshard("x", f.x_in);
  const Plan up = b.contract("h = x W_in", "bsm,mh->bsh", "x", "W_in", "h", f.h, false);
  b.elementwise(FfnStage::Kind::gelu, "g = gelu(h)", {"h"}, "g");
  b.reshard("g", f.g_in);
  const Plan down = b.contract("y = g W_out", "bsh,hm->bsm", "g", "W_out", "y", f.y, false);

  std::vector<std::string> inputs = {"x", "W_in", "W_out"}, outputs = {"y"};
  if (config.backward) {
    // dy = R arrives split like y. Each gradient contraction reaches the spec of the tensor it is
    // the gradient of, as that tensor was before any reshard (dx like x, dg like h).
    b.phase = FfnPhase::backward;
    b.held["dy"] = {f.y, shape_x(d)};
    b.reshard("dy", summed(down.product));
    b.contract("dg = dy W_out^T", "bsm,hm->bsh", "dy", "W_out", "dg", f.h, false);
    b.contract("dW_out = g^T dy", "bsh,bsm->hm", "g", "dy", "dW_out", f.w_out, true);
    b.elementwise(FfnStage::Kind::gelu_backward, "dh = dg * gelu'(h)", {"dg", "h"}, "dh");
    b.reshard("dh", summed(up.product));
    b.contract("dx = dh W_in^T", "bsh,mh->bsm", "dh", "W_in", "dx", f.x, false);
    b.contract("dW_in = x^T dh", "bsm,bsh->mh", "x", "dh", "dW_in", f.w_in, true);
    inputs.push_back("dy");
    outputs.insert(outputs.end(), {"dx", "dW_in", "dW_out"});
  }
  p.stages = std::move(b.stages);
  account_memory(p, inputs, outputs);
  return p;
}

std::string ffn_plan_text(const FfnPlan& plan) {
  std::string out;
  int i = 1;
  for (const auto& s : plan.stages) {
    out += "  [" + std::to_string(i++) + "] " + phase_name(s.phase) + ": " + s.title + "\n";
    if (s.kind == FfnStage::Kind::contraction) {
      out += plan_text(s.plan);
    } else if (s.kind == FfnStage::Kind::reshard) {
      Table t({"#", "step", "over", "dim", "spec", "local block", "bytes/device"});
      int k = 1;
      for (const auto& st : s.steps)
        t.add({std::to_string(k++), step_kind_name(st.kind) + " " + st.tensor, axes_text(st.axes),
               std::to_string(st.dim), st.before.text() + " -> " + st.after.text(),
               shape_text(st.local_before) + " -> " + shape_text(st.local_after), std::to_string(st.predicted_bytes)});
      out += t.text();
    } else {
      out += "  elementwise on each device's block of " + s.out_spec.text() + ": no messages\n";
    }
  }
  return out;
}

std::string ffn_collectives_summary(const FfnPlan& plan, FfnPhase phase) {
  std::vector<std::string> parts;
  for (const PlanStep* s : plan.collectives(phase))
    parts.push_back(step_kind_name(s->kind) + " " + s->tensor + " over " + axes_text(s->axes));
  return parts.empty() ? "none" : join(parts, "; ");
}

}  // namespace shardlab
