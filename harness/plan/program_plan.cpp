// Planning a tensor program's ops (harness/plan/program_plan.hpp): each op from the specs its
// operands are held in, partial sums deferred where only linear ops read them, moved copies kept
// for later einsums. Running a plan and its memory are in program_spmd.cpp, the plan as a table
// in program_explain.cpp.
#include "harness/plan/program_plan.hpp"

#include <algorithm>
#include <set>

#include "collectives/predict.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/ops.hpp"
#include "core/roll.hpp"
#include "core/split.hpp"
#include "core/text.hpp"
#include "harness/plan/layout_search.hpp"
#include "harness/plan/plan_search.hpp"

namespace shardlab {

std::vector<const PlanStep*> OpPlan::collectives() const {
  std::vector<const PlanStep*> out;
  for (const auto& r : reshard)
    for (const auto& s : r)
      if (s.communicates()) out.push_back(&s);
  if (has_contraction)
    for (const auto* s : contraction.collectives()) out.push_back(s);
  for (const auto& s : finish)
    if (s.communicates()) out.push_back(&s);
  return out;
}

std::vector<const PlanStep*> ProgramPlan::collectives() const {
  std::vector<const PlanStep*> out;
  for (const auto& o : ops)
    for (const auto* s : o.collectives()) out.push_back(s);
  return out;
}

std::size_t ProgramPlan::predicted_bytes_per_device() const {
  std::size_t n = 0;
  for (const auto* s : collectives()) n += s->predicted_bytes;
  return n;
}

std::vector<std::string> ProgramPlan::collective_lines() const {
  std::vector<std::string> out;
  for (const auto* s : collectives()) out.push_back(step_kind_name(s->kind) + " " + s->tensor + " over " + axes_text(s->axes));
  return out;
}

bool moves_operand(const Plan& p, int k) {
  for (const auto& s : p.steps)
    if (s.kind != StepKind::contract && s.operand == k) return true;
  return false;
}

RollSplit roll_split(const TensorProgram& p, const Mesh& mesh, const ProgramOp& op, const Spec& out) {
  RollSplit r;
  const std::string& dims = p.dims.at(op.out);
  r.dim = dims.find(op.over[0]);
  const long size = long(p.sizes.at(op.over[0]));
  const long by = ((long(op.value) % size) + size) % size;
  const int n = mesh.axes_size(out.dims[r.dim]);
  if (n <= 1) return r;  // the dim is whole on every device: a local roll
  if (size % n != 0)  // uneven blocks: moving whole blocks would move padding or misalign
    throw Error(ErrorKind::unsupported, "roll of " + op.out + " along " + std::string(1, op.over[0]) + " (" +
                                            std::to_string(size) + ") split over " + axes_text(out.dims[r.dim]) +
                                            " (" + std::to_string(n) + " devices): a roll moves whole blocks, and " +
                                            std::to_string(n) + " does not divide " + std::to_string(size) +
                                            "; use a size that divides, or keep that dim whole");
  const long block = size / n;
  if (by % block != 0)
    throw Error(ErrorKind::unsupported, "roll of " + op.out + " by " + std::to_string(long(op.value)) + " along " +
                                            std::string(1, op.over[0]) + ", split over " + axes_text(out.dims[r.dim]) +
                                            " into blocks of " + std::to_string(block) +
                                            ": only whole blocks move (a multiple of " + std::to_string(block) + ")");
  r.axes = out.dims[r.dim];
  r.shift = by / block;
  return r;
}

namespace {

// Ops that commute with a sum over devices: applied to each device's partial sums they give the
// partial sums of the result.
bool linear_op(const ProgramOp& op) {
  return op.name == "add" || op.name == "sub" || op.name == "neg" || op.name == "copy" || op.name == "scale" ||
         op.name == "rename";
}

// Tensors that may be held as partial sums: made by an einsum or a linear op, not an output, and
// read only by linear ops whose other operands may be held so too.
std::set<std::string> deferrable_tensors(const TensorProgram& p) {
  std::map<std::string, std::vector<std::size_t>> readers;
  for (std::size_t i = 0; i < p.ops.size(); ++i)
    for (const auto& t : p.ops[i].in) readers[t].push_back(i);
  const std::set<std::string> outputs(p.outputs.begin(), p.outputs.end());
  std::set<std::string> d;
  for (const auto& op : p.ops)
    if ((op.kind == OpKind::einsum || linear_op(op)) && !outputs.count(op.out) && readers.count(op.out))
      d.insert(op.out);
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = d.begin(); it != d.end();) {
      bool ok = true;
      for (std::size_t i : readers[*it]) {
        ok = ok && linear_op(p.ops[i]);
        for (const auto& u : p.ops[i].in) ok = ok && d.count(u) > 0;
      }
      if (ok) {
        ++it;
      } else {
        it = d.erase(it);
        changed = true;
      }
    }
  }
  return d;
}

}  // namespace

namespace {

// One pass over the program's ops, each planned from the specs its operands are held in.
class OpsPlanner {
 public:
  OpsPlanner(ProgramPlan& pp, bool article)
      : pp_(pp), program_(pp.program), mesh_(pp.mesh), article_(article), eb_(element_bytes(pp.dtype)),
        deferrable_(deferrable_tensors(pp.program)) {
    // Each tensor as it is held: its propagated spec, or for a deferred one its partial sums.
    for (const auto& kv : program_.inputs) pp_.stored[kv.first] = pp_.propagation.specs.at(kv.first).spec;
  }

  void plan(std::size_t i) {
    const ProgramOp& op = program_.ops[i];
    OpPlan o;
    o.op = i;
    if (i == pp_.backward_from && !pp_.keep_gathered) kept_.clear();
    if (op.kind == OpKind::rename) root_[op.out] = root_of(op.in[0]);
    const Spec out = pp_.propagation.specs.at(op.out).spec;
    const PlanOptions options{false, op.out, eb_};
    // A linear op whose operands all hold the same partial sums works on them as they are.
    bool on_partials = linear_op(op);
    for (const auto& t : op.in)
      on_partials = on_partials && spec(t).is_partial() && spec(t) == spec(op.in[0]) &&
                    program_.dims.at(t) == program_.dims.at(op.in[0]);
    try {
      if (on_partials) {  // add, sub, neg, copy, scale, rename of partial sums: still partial sums
        for (std::size_t k = 0; k < op.in.size(); ++k) o.reshard.push_back({});
        o.computed = spec(op.in[0]);
        if (!deferrable_.count(op.out)) o.finish = search_reshard(mesh_, operand(op.out, o.computed), out, options);
      } else if (op.kind == OpKind::einsum) {
        plan_einsum(op, out, options, o);
      } else if (op.kind == OpKind::reduce) {
        plan_reduce(op, out, options, o);
      } else {
        plan_local(op, out, options, o);
      }
    } catch (const Error& e) {
      throw Error(e.kind(), op_label(program_, i) + ": " + e.what());
    }
    keep_result(i, op, out, on_partials, o);
    pp_.ops.push_back(std::move(o));
  }

 private:
  struct Copy {
    Spec spec;
    std::size_t op = 0;
    int operand = 0;
  };
  ProgramPlan& pp_;
  const TensorProgram& program_;
  const Mesh& mesh_;
  const bool article_;
  const std::size_t eb_;
  const std::set<std::string> deferrable_;
  std::map<std::string, std::string> root_;  // the tensor whose blocks each renamed tensor holds (x for x_t)
  std::map<std::string, Copy> kept_;         // by root: the latest copy an einsum of this pass moved it into

  std::string root_of(const std::string& t) const {
    auto it = root_.find(t);
    return it == root_.end() ? t : it->second;
  }
  const Spec& spec(const std::string& t) const { return pp_.stored.at(t); }
  Operand operand(const std::string& t, const Spec& s) const { return Operand{t, s, program_.shape(t)}; }

  Plan plan_from(const Einsum& eq, const ProgramOp& op, const Spec& out, const PlanOptions& options, const Spec& sa,
                 const Spec& sb) const {
    const Operand a = operand(op.in[0], sa), b = operand(op.in[1], sb);
    return article_ ? plan_contraction(eq, mesh_, a, b, out, options)
                    : search_contraction(eq, mesh_, a, b, out, options).best;
  }

  void plan_einsum(const ProgramOp& op, const Spec& out, const PlanOptions& options, OpPlan& o) {
    const Einsum eq = Einsum::parse(op.eq);
    o.has_contraction = true;
    o.contraction = plan_from(eq, op, out, options, spec(op.in[0]), spec(op.in[1]));
    if (article_ && op.grad_operand >= 0 && pp_.ops[static_cast<std::size_t>(op.from_op)].has_contraction) {
      // The articles' backward follows the forward plan: dz starts where the forward einsum
      // computed z (its product's layout, partial sums dropped).
      const int k = op.grad_operand;
      const std::string& dz = op.in[static_cast<std::size_t>(k)];
      Spec start = pp_.ops[static_cast<std::size_t>(op.from_op)].contraction.product;
      start.partial.clear();
      std::vector<PlanStep> to_start = search_reshard(mesh_, operand(dz, spec(dz)), start, options);
      for (auto& s : to_start) s.operand = k;
      o.contraction = plan_from(eq, op, out, options, k == 0 ? start : spec(op.in[0]), k == 1 ? start : spec(op.in[1]));
      o.contraction.steps.insert(o.contraction.steps.begin(), to_start.begin(), to_start.end());
      (k == 0 ? o.contraction.a : o.contraction.b).spec = spec(dz);
    }
    for (int mask = 1; mask < 4; ++mask) {  // from the copies kept in this pass, where cheaper
      bool use[2] = {(mask & 1) != 0, (mask & 2) != 0}, possible = true;
      Spec start[2];
      for (int k = 0; k < 2; ++k) {
        const std::string r = root_of(op.in[static_cast<std::size_t>(k)]);
        possible = possible && (!use[k] || kept_.count(r));
        start[k] = use[k] && kept_.count(r) ? kept_.at(r).spec : spec(op.in[static_cast<std::size_t>(k)]);
      }
      if (!possible) continue;
      Plan p = plan_from(eq, op, out, options, start[0], start[1]);
      if (p.predicted_bytes_per_device() < o.contraction.predicted_bytes_per_device()) {
        o.contraction = std::move(p);
        for (int k = 0; k < 2; ++k) {
          o.reuse[k] = use[k];
          if (!use[k]) continue;
          const Copy& c = kept_.at(root_of(op.in[static_cast<std::size_t>(k)]));
          o.reuse_op[k] = c.op;
          o.reuse_operand[k] = c.operand;
        }
      }
    }
    o.flops_per_device = o.contraction.flops_per_device();
    o.computed = out;
  }

  // A step of the finish, `kind` over `axes` on the op's result held as `held`.
  PlanStep finish_step(StepKind kind, const ProgramOp& op, const std::vector<std::string>& axes,
                       const Spec& held) const {
    PlanStep s;
    s.kind = kind;
    s.operand = 2;
    s.tensor = op.out;
    s.axes = axes;
    s.before = s.after = held;
    s.local_before = s.local_after = local_shape(mesh_, held, program_.shape(op.out));
    return s;
  }

  // Ops computed on each device's blocks where they lie, after their operands are moved.
  void plan_local(const ProgramOp& op, const Spec& out, const PlanOptions& options, OpPlan& o) const {
    const std::string& out_dims = program_.dims.at(op.out);
    auto to = [&](const std::string& t, const Spec& target) {
      o.reshard.push_back(search_reshard(mesh_, operand(t, spec(t)), target, options));
    };
    o.computed = out;
    switch (op.kind) {
      case OpKind::unary:
      case OpKind::softmax: {
        // A copy exists to move its input: the ledger names what it makes.
        Operand in = operand(op.in[0], spec(op.in[0]));
        if (op.name == "copy") in.name = op.out;
        o.reshard.push_back(search_reshard(mesh_, in, out, options));
        if (op.name != "roll") break;
        const RollSplit r = roll_split(program_, mesh_, op, out);
        if (r.shift == 0) break;
        PlanStep s = finish_step(StepKind::collective_permute, op, r.axes, out);
        s.dim = int(r.dim);
        s.shift = int(r.shift);
        s.reason = "roll by " + std::to_string(r.shift) + " whole block" + (r.shift == 1 ? "" : "s") + " along " +
                   axes_text(r.axes);
        s.predicted_bytes = predicted_bytes_sent("collective_permute", mesh_.axes_size(r.axes),
                                                 element_count(s.local_before) * eb_, eb_);
        o.finish.push_back(s);
        break;
      }
      case OpKind::rename:  // the same blocks under new letters: out's spec read position by position
        to(op.in[0], out);
        break;
      case OpKind::broadcast:
        to(op.in[0], restricted(out, out_dims, program_.dims.at(op.in[0])));
        break;
      case OpKind::split:  // the input as out lies, its split dim whole: then each device keeps its part
        to(op.in[0], widened(out, out_dims, program_.dims.at(op.in[0])));
        break;
      case OpKind::concat:  // each part as out lies (out's stacked dim is whole): then stacked locally
      case OpKind::binary:
        for (const auto& t : op.in) to(t, restricted(out, out_dims, program_.dims.at(t)));
        break;
      case OpKind::einsum:
      case OpKind::reduce:
        break;  // plan_einsum, plan_reduce
    }
  }

  void plan_reduce(const ProgramOp& op, const Spec& out, const PlanOptions& options, OpPlan& o) const {
    const std::string& in_dims = program_.dims.at(op.in[0]);
    o.reshard.push_back({});
    if (op.name == "max") {
      // Each device takes the max of its block; where a reduced dim was split, the devices
      // along its axes hold maxima of their parts, and an all-reduce of max completes them.
      const Spec in = spec(op.in[0]);
      o.computed = reduced(in, in_dims, op.over, false);
      std::vector<std::string> axes;
      for (std::size_t d = 0; d < in_dims.size(); ++d)
        if (op.over.find(in_dims[d]) != std::string::npos) axes.insert(axes.end(), in.dims[d].begin(), in.dims[d].end());
      PlanStep s = finish_step(StepKind::all_reduce_max, op, axes, o.computed);
      s.reason = "the largest of each device's maxima over " + axes_text(s.axes);
      if (mesh_.axes_size(s.axes) > 1) {
        s.predicted_bytes = predicted_bytes_sent("all_reduce_max", mesh_.axes_size(s.axes),
                                                 element_count(s.local_before) * eb_, eb_);
        o.finish.push_back(s);
      }
    } else {
      o.computed = reduced(spec(op.in[0]), in_dims, op.over, true);
    }
    const std::vector<PlanStep> rest = search_reshard(mesh_, operand(op.out, o.computed), out, options);
    o.finish.insert(o.finish.end(), rest.begin(), rest.end());
  }

  // How op i's result is held from now on, and the copies its einsum moved, kept for later ops.
  void keep_result(std::size_t i, const ProgramOp& op, const Spec& out, bool on_partials, OpPlan& o) {
    pp_.stored[op.out] = out;
    if (o.has_contraction && deferrable_.count(op.out) && o.contraction.product.is_partial()) {
      // Deferred: the product's partial sums are kept, and completed by the op that needs them whole.
      auto& steps = o.contraction.steps;
      const auto c =
          std::find_if(steps.begin(), steps.end(), [](const PlanStep& s) { return s.kind == StepKind::contract; });
      steps.erase(c + 1, steps.end());
      o.contraction.out_spec = o.contraction.product;
      o.computed = o.contraction.product;
      pp_.stored[op.out] = o.computed;
    } else if (on_partials && deferrable_.count(op.out)) {
      pp_.stored[op.out] = o.computed;
    }
    if (o.has_contraction) {
      if (moves_operand(o.contraction, 0)) kept_[root_of(op.in[0])] = {o.contraction.a_used, i, 0};
      if (moves_operand(o.contraction, 1)) kept_[root_of(op.in[1])] = {o.contraction.b_used, i, 1};
    }
  }
};

}  // namespace

ProgramPlan plan_tensor_program(const TensorProgram& program, const Mesh& mesh, const Propagation& propagation,
                                DType dtype, bool article, std::size_t backward_from, bool keep_gathered) {
  ProgramPlan pp;
  pp.backward_from = backward_from;
  pp.keep_gathered = keep_gathered;
  pp.article = article;
  pp.program = program;
  pp.mesh = mesh;
  pp.propagation = propagation;
  pp.dtype = dtype;
  OpsPlanner planner(pp, article);
  for (std::size_t i = 0; i < pp.program.ops.size(); ++i) planner.plan(i);
  return pp;
}

std::vector<int> partial_groups(const ProgramPlan& plan) {
  std::vector<int> out;
  for (const auto& o : plan.ops) {
    const Spec& s = o.has_contraction ? o.contraction.product : o.computed;
    out.push_back(plan.mesh.axes_size(s.partial));
  }
  return out;
}

std::vector<bool> on_partial_sums(const ProgramPlan& plan) {
  std::vector<bool> out;
  for (const auto& o : plan.ops) {
    bool partial = !plan.program.ops[o.op].in.empty();
    for (const auto& t : plan.program.ops[o.op].in) partial = partial && plan.stored.at(t).is_partial();
    out.push_back(partial && !o.has_contraction);
  }
  return out;
}

}  // namespace shardlab
