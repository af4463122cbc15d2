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
#include "core/table.hpp"
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

// Whether the plan's steps move operand k before the product (a spec that differs only in axes
// of size 1 moves nothing and makes no copy).
bool moves_operand(const Plan& p, int k) {
  for (const auto& s : p.steps)
    if (s.kind != StepKind::contract && s.operand == k) return true;
  return false;
}

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

ProgramPlan plan_program_ops(const TensorProgram& program, const Mesh& mesh, const Propagation& propagation,
                             DType dtype, bool article, std::size_t backward_from, bool keep_gathered) {
  ProgramPlan pp;
  pp.backward_from = backward_from;
  pp.keep_gathered = keep_gathered;
  pp.article = article;
  pp.program = program;
  pp.mesh = mesh;
  pp.propagation = propagation;
  pp.dtype = dtype;
  const std::size_t eb = element_bytes(dtype);
  // Each tensor as it is held: its propagated spec, or for a deferred one its partial sums.
  for (const auto& kv : program.inputs) pp.stored[kv.first] = propagation.specs.at(kv.first).spec;
  auto spec = [&](const std::string& t) { return pp.stored.at(t); };
  const std::set<std::string> deferrable = deferrable_tensors(program);
  // The tensor whose blocks each renamed tensor holds (x for x_t = rename(x)); others their own.
  std::map<std::string, std::string> root;
  auto root_of = [&](const std::string& t) {
    auto it = root.find(t);
    return it == root.end() ? t : it->second;
  };
  struct Copy {
    Spec spec;
    std::size_t op = 0;
    int operand = 0;
  };
  std::map<std::string, Copy> kept;  // by root: the latest copy an einsum of this pass moved it into
  for (std::size_t i = 0; i < program.ops.size(); ++i) {
    const ProgramOp& op = program.ops[i];
    OpPlan o;
    o.op = i;
    if (i == backward_from && !keep_gathered) kept.clear();
    if (op.kind == OpKind::rename) root[op.out] = root_of(op.in[0]);
    const Spec out = propagation.specs.at(op.out).spec;
    const std::string& out_dims = program.dims.at(op.out);
    // A linear op whose operands all hold the same partial sums works on them as they are.
    bool on_partials = linear_op(op);
    for (const auto& t : op.in)
      on_partials = on_partials && spec(t).is_partial() && spec(t) == spec(op.in[0]) &&
                    program.dims.at(t) == program.dims.at(op.in[0]);
    auto operand = [&](const std::string& t, const Spec& s) { return Operand{t, s, program.shape(t)}; };
    PlanOptions options{false, op.out, eb};
    try {
      if (on_partials) {  // add, sub, neg, copy, scale, rename of partial sums: still partial sums
        for (std::size_t k = 0; k < op.in.size(); ++k) o.reshard.push_back({});
        o.computed = spec(op.in[0]);
        if (!deferrable.count(op.out)) o.finish = search_reshard(mesh, operand(op.out, o.computed), out, options);
      } else
      switch (op.kind) {
        case OpKind::einsum: {
          const Einsum eq = Einsum::parse(op.eq);
          auto plan_from = [&](const Spec& sa, const Spec& sb) {
            const Operand a = operand(op.in[0], sa), b = operand(op.in[1], sb);
            return article ? plan_contraction(eq, mesh, a, b, out, options)
                           : search_contraction(eq, mesh, a, b, out, options).best;
          };
          o.has_contraction = true;
          o.contraction = plan_from(spec(op.in[0]), spec(op.in[1]));
          if (article && op.grad_operand >= 0 && pp.ops[static_cast<std::size_t>(op.from_op)].has_contraction) {
            // The articles' backward follows the forward plan: dz starts where the forward einsum
            // computed z (its product's layout, partial sums dropped).
            const int k = op.grad_operand;
            const std::string& dz = op.in[static_cast<std::size_t>(k)];
            Spec start = pp.ops[static_cast<std::size_t>(op.from_op)].contraction.product;
            start.partial.clear();
            std::vector<PlanStep> to_start = search_reshard(mesh, operand(dz, spec(dz)), start, options);
            for (auto& s : to_start) s.operand = k;
            o.contraction = plan_from(k == 0 ? start : spec(op.in[0]), k == 1 ? start : spec(op.in[1]));
            o.contraction.steps.insert(o.contraction.steps.begin(), to_start.begin(), to_start.end());
            (k == 0 ? o.contraction.a : o.contraction.b).spec = spec(dz);
          }
          for (int mask = 1; mask < 4; ++mask) {  // from the copies kept in this pass, where cheaper
            bool use[2] = {(mask & 1) != 0, (mask & 2) != 0}, possible = true;
            Spec start[2];
            for (int k = 0; k < 2; ++k) {
              const std::string r = root_of(op.in[static_cast<std::size_t>(k)]);
              possible = possible && (!use[k] || kept.count(r));
              start[k] = use[k] && kept.count(r) ? kept.at(r).spec : spec(op.in[static_cast<std::size_t>(k)]);
            }
            if (!possible) continue;
            Plan p = plan_from(start[0], start[1]);
            if (p.predicted_bytes_per_device() < o.contraction.predicted_bytes_per_device()) {
              o.contraction = std::move(p);
              for (int k = 0; k < 2; ++k) {
                o.reuse[k] = use[k];
                if (!use[k]) continue;
                const Copy& c = kept.at(root_of(op.in[static_cast<std::size_t>(k)]));
                o.reuse_op[k] = c.op;
                o.reuse_operand[k] = c.operand;
              }
            }
          }
          o.flops_per_device = o.contraction.flops_per_device();
          o.computed = out;
          break;
        }
        case OpKind::unary:
        case OpKind::softmax: {
          // A copy exists to move its input: the ledger names what it makes.
          Operand in = operand(op.in[0], spec(op.in[0]));
          if (op.name == "copy") in.name = op.out;
          o.reshard.push_back(search_reshard(mesh, in, out, options));
          o.computed = out;
          if (op.name == "roll") {
            const RollSplit r = roll_split(program, mesh, op, out);
            if (r.shift != 0) {
              PlanStep s;
              s.kind = StepKind::collective_permute;
              s.operand = 2;
              s.tensor = op.out;
              s.axes = r.axes;
              s.dim = int(r.dim);
              s.shift = int(r.shift);
              s.before = s.after = out;
              s.local_before = s.local_after = local_shape(mesh, out, program.shape(op.out));
              s.reason = "roll by " + std::to_string(r.shift) + " whole block" + (r.shift == 1 ? "" : "s") +
                         " along " + axes_text(r.axes);
              s.predicted_bytes = predicted_bytes_sent("collective_permute", mesh.axes_size(r.axes),
                                                       element_count(s.local_before) * eb, eb);
              o.finish.push_back(s);
            }
          }
          break;
        }
        case OpKind::rename:  // the same blocks under new letters: out's spec read position by position
          o.reshard.push_back(search_reshard(mesh, operand(op.in[0], spec(op.in[0])), out, options));
          o.computed = out;
          break;
        case OpKind::broadcast:
          o.reshard.push_back(search_reshard(
              mesh, operand(op.in[0], spec(op.in[0])), restricted(out, out_dims, program.dims.at(op.in[0])), options));
          o.computed = out;
          break;
        case OpKind::split:  // the input as out lies, its split dim whole: then each device keeps its part
          o.reshard.push_back(search_reshard(
              mesh, operand(op.in[0], spec(op.in[0])), widened(out, out_dims, program.dims.at(op.in[0])), options));
          o.computed = out;
          break;
        case OpKind::concat:  // each part as out lies (out's stacked dim is whole): then stacked locally
        case OpKind::binary:
          for (const auto& t : op.in)
            o.reshard.push_back(
                search_reshard(mesh, operand(t, spec(t)), restricted(out, out_dims, program.dims.at(t)), options));
          o.computed = out;
          break;
        case OpKind::reduce: {
          const std::string& in_dims = program.dims.at(op.in[0]);
          if (op.name == "max") {
            // Each device takes the max of its block; where a reduced dim was split, the devices
            // along its axes hold maxima of their parts, and an all-reduce of max completes them.
            const Spec in = spec(op.in[0]);
            o.reshard.push_back({});
            o.computed = reduced(in, in_dims, op.over, false);
            PlanStep s;
            s.kind = StepKind::all_reduce_max;
            s.operand = 2;
            s.tensor = op.out;
            for (std::size_t d = 0; d < in_dims.size(); ++d)
              if (op.over.find(in_dims[d]) != std::string::npos)
                s.axes.insert(s.axes.end(), in.dims[d].begin(), in.dims[d].end());
            s.before = s.after = o.computed;
            s.local_before = s.local_after = local_shape(mesh, o.computed, program.shape(op.out));
            s.reason = "the largest of each device's maxima over " + axes_text(s.axes);
            if (mesh.axes_size(s.axes) > 1) {
              s.predicted_bytes = predicted_bytes_sent("all_reduce_max", mesh.axes_size(s.axes),
                                                       element_count(s.local_before) * eb, eb);
              o.finish.push_back(s);
            }
          } else {
            o.reshard.push_back({});
            o.computed = reduced(spec(op.in[0]), in_dims, op.over, true);
          }
          const std::vector<PlanStep> rest = search_reshard(mesh, operand(op.out, o.computed), out, options);
          o.finish.insert(o.finish.end(), rest.begin(), rest.end());
          break;
        }
      }
    } catch (const Error& e) {
      throw Error(e.kind(), op_label(program, i) + ": " + e.what());
    }
    pp.stored[op.out] = out;
    if (o.has_contraction && deferrable.count(op.out) && o.contraction.product.is_partial()) {
      // Deferred: the product's partial sums are kept, and completed by the op that needs them whole.
      auto& steps = o.contraction.steps;
      const auto c = std::find_if(steps.begin(), steps.end(), [](const PlanStep& s) { return s.kind == StepKind::contract; });
      steps.erase(c + 1, steps.end());
      o.contraction.out_spec = o.contraction.product;
      o.computed = o.contraction.product;
      pp.stored[op.out] = o.computed;
    } else if (on_partials && deferrable.count(op.out)) {
      pp.stored[op.out] = o.computed;
    }
    if (o.has_contraction) {
      if (moves_operand(o.contraction, 0)) kept[root_of(op.in[0])] = {o.contraction.a_used, i, 0};
      if (moves_operand(o.contraction, 1)) kept[root_of(op.in[1])] = {o.contraction.b_used, i, 1};
    }
    pp.ops.push_back(std::move(o));
  }
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

std::string program_plan_text(const ProgramPlan& plan) {
  // The op's kind shows in its step rows (contract, gelu, ...): the op column names its output only.
  Table t({"op", "computes", "step", "tensor", "over", "spec", "sent/device"});
  for (const auto& o : plan.ops) {
    const ProgramOp& op = plan.program.ops[o.op];
    const std::string label = std::to_string(o.op + 1);
    bool first = true;
    auto row = [&](const std::string& step, const std::string& tensor, const std::string& over, const std::string& spec,
                   const std::string& bytes) {
      t.add({first ? label : "", first ? op.out : "", step, tensor, over, spec, bytes});
      first = false;
    };
    auto steps = [&](const std::vector<PlanStep>& list) {
      for (const auto& s : list)
        row(step_kind_name(s.kind), s.tensor, axes_text(s.axes), s.before.text() + " -> " + s.after.text(),
            std::to_string(s.predicted_bytes));
    };
    for (const auto& r : o.reshard) steps(r);
    for (int k = 0; k < 2; ++k)
      if (o.reuse[k]) {
        const Spec& s = k == 0 ? o.contraction.a.spec : o.contraction.b.spec;
        const std::string& from = plan.program.ops[o.reuse_op[k]].in[static_cast<std::size_t>(o.reuse_operand[k])];
        const std::string& t = op.in[static_cast<std::size_t>(k)];
        row("reuse", t, "", s.text() + " (" + (from == t ? "" : from + "'s copy, ") + "moved for op " +
                                std::to_string(o.reuse_op[k] + 1) + ")", "0");
      }
    if (o.has_contraction) {
      for (const auto& s : o.contraction.steps)
        if (s.kind == StepKind::contract)
          row("contract", op.out, "", o.contraction.a_used.text() + " x " + o.contraction.b_used.text() + " -> " +
                                          s.after.text(), "0");
        else
          row(step_kind_name(s.kind), s.tensor, axes_text(s.axes), s.before.text() + " -> " + s.after.text(),
              std::to_string(s.predicted_bytes));
    } else {
      row(op.name, op.out, "", o.computed.text(), "0");
    }
    steps(o.finish);
  }
  return t.text();
}

namespace {

// The tensors each op frees once it has run: operands read for the last time, not outputs.
std::vector<std::vector<std::string>> frees_after(const TensorProgram& p) {
  std::map<std::string, std::size_t> last;
  for (std::size_t i = 0; i < p.ops.size(); ++i)
    for (const auto& t : p.ops[i].in) last[t] = i;
  const std::set<std::string> kept(p.outputs.begin(), p.outputs.end());
  std::vector<std::vector<std::string>> out(p.ops.size());
  for (const auto& [t, i] : last)
    if (!kept.count(t)) out[i].push_back(t);
  return out;
}

// Each kept copy, (op j, operand k) -> the last op that reuses it: op j keeps its moved copy of
// operand k until then.
using CopyKey = std::pair<std::size_t, int>;
std::map<CopyKey, std::size_t> kept_copies(const ProgramPlan& plan) {
  std::map<CopyKey, std::size_t> last;
  for (std::size_t j = 0; j < plan.ops.size(); ++j)
    for (int k = 0; k < 2; ++k)
      if (plan.ops[j].reuse[k]) last[{plan.ops[j].reuse_op[k], plan.ops[j].reuse_operand[k]}] = j;
  return last;
}

}  // namespace

std::size_t predicted_peak_bytes(const ProgramPlan& plan) {
  const TensorProgram& p = plan.program;
  const std::size_t eb = element_bytes(plan.dtype);
  auto bytes = [&](const std::string& t, const Spec& s) {
    return element_count(local_shape(plan.mesh, s, p.shape(t))) * eb;
  };
  std::map<std::string, std::size_t> held;
  std::map<CopyKey, std::size_t> kept;
  const auto copies = kept_copies(plan);
  for (const auto& kv : p.inputs) held[kv.first] = bytes(kv.first, plan.stored.at(kv.first));
  auto live = [&] {
    std::size_t n = 0;
    for (const auto& kv : held) n += kv.second;
    for (const auto& kv : kept) n += kv.second;
    return n;
  };
  std::size_t peak = live();
  const auto frees = frees_after(p);
  for (std::size_t j = 0; j < plan.ops.size(); ++j) {
    const OpPlan& o = plan.ops[j];
    const ProgramOp& op = p.ops[o.op];
    std::size_t extra = 0;
    for (std::size_t k = 0; k < o.reshard.size(); ++k)
      if (!o.reshard[k].empty()) extra += bytes(op.in[k], o.reshard[k].back().after);
    if (o.has_contraction)
      for (int k = 0; k < 2; ++k) {
        const Spec& used = k == 0 ? o.contraction.a_used : o.contraction.b_used;
        if (moves_operand(o.contraction, k))
          extra += bytes(op.in[static_cast<std::size_t>(k)], used);
      }
    const std::size_t out = bytes(op.out, plan.stored.at(op.out));
    peak = std::max(peak, live() + extra + out);
    held[op.out] = out;
    for (const auto& t : frees[o.op]) held.erase(t);
    for (int k = 0; k < 2; ++k)
      if (copies.count({j, k}))
        kept[{j, k}] = bytes(op.in[static_cast<std::size_t>(k)], k == 0 ? o.contraction.a_used : o.contraction.b_used);
    for (auto it = kept.begin(); it != kept.end();) it = copies.at(it->first) <= j ? kept.erase(it) : std::next(it);
    peak = std::max(peak, live());
  }
  return peak;
}

Program program_spmd(const ProgramPlan& plan, const std::map<std::string, Tensor>& inputs) {
  return [&plan, &inputs](Device& dev) -> Outputs {
    const TensorProgram& p = plan.program;
    const std::size_t eb = element_bytes(plan.dtype);
    std::map<std::string, Tensor> held;
    std::map<CopyKey, Tensor> kept;
    const auto copies = kept_copies(plan);
    for (const auto& kv : p.inputs)
      held[kv.first] = local_block(inputs.at(kv.first), dev.mesh(), plan.propagation.specs.at(kv.first).spec, dev.id());
    auto live = [&] {
      std::size_t n = 0;
      for (const auto& kv : held) n += kv.second.size() * eb;
      for (const auto& kv : kept) n += kv.second.size() * eb;
      return n;
    };
    std::size_t peak = live();
    std::vector<double> dirty;  // Uneven::pad: per op, 1 when its stored block held a nonzero in the padding
    const auto frees = frees_after(p);
    for (std::size_t j = 0; j < plan.ops.size(); ++j) {
      const OpPlan& o = plan.ops[j];
      const ProgramOp& op = p.ops[o.op];
      const std::string& out_dims = p.dims.at(op.out);
      std::vector<Tensor> args;
      std::size_t extra = 0;
      for (std::size_t k = 0; k < o.reshard.size(); ++k) {
        args.push_back(execute_steps(dev, o.reshard[k], held.at(op.in[k])));
        if (!o.reshard[k].empty()) extra += args.back().size() * eb;
      }
      Tensor y;
      std::map<CopyKey, Tensor> made;  // copies this op keeps, counted in `extra` until it ends
      // Uneven::pad: blocks are stored ceil(d/n) rows long, zeros after the real rows.
      // An einsum may run on them as stored (zero rows add nothing and make zero rows), but a
      // softmax, a max, a mean's centring or an add of a bias would let padding into real results
      // or make it nonzero. So every other op reads only the real rows of its operands (masked, in
      // effect) and its result is stored padded with zeros again.
      const bool pad = dev.mesh().uneven() == Uneven::pad && op.kind != OpKind::einsum;
      if (pad)
        for (std::size_t k = 0; k < args.size(); ++k) {
          const Spec& spec = o.reshard[k].empty() ? plan.stored.at(op.in[k]) : o.reshard[k].back().after;
          args[k] = real_part(args[k], block_of(dev.mesh(), spec, p.shape(op.in[k]), dev.id()));
        }
      switch (op.kind) {
        case OpKind::einsum: {
          // The operands' steps here, in the plan's order, so that a moved copy can be kept.
          Tensor moved[2];
          const Tensor* cur[2];
          for (int k = 0; k < 2; ++k) {
            const auto& name = op.in[static_cast<std::size_t>(k)];
            cur[k] = o.reuse[k] ? &kept.at({o.reuse_op[k], o.reuse_operand[k]}) : &held.at(name);
          }
          Plan rest = o.contraction;
          rest.steps.clear();
          for (const auto& s : o.contraction.steps) {
            if (s.kind == StepKind::contract || s.operand > 1 || !rest.steps.empty()) {
              rest.steps.push_back(s);
              continue;
            }
            moved[s.operand] = execute_steps(dev, {s}, *cur[s.operand]);
            cur[s.operand] = &moved[s.operand];
          }
          rest.a.spec = rest.a_used;
          rest.b.spec = rest.b_used;
          y = execute_plan(dev, rest, *cur[0], *cur[1]);
          for (int k = 0; k < 2; ++k)
            if (cur[k] == &moved[k]) extra += moved[k].size() * eb;
          for (int k = 0; k < 2; ++k)
            if (copies.count({j, k})) made[{j, k}] = std::move(moved[k]);
          break;
        }
        case OpKind::unary:
          if (op.name == "roll") {  // within a block, or the whole block (then moved by the finish step)
            const RollSplit r = roll_split(p, dev.mesh(), op, plan.propagation.specs.at(op.out).spec);
            y = r.axes.empty() ? roll_op(args[0], r.dim, long(op.value)) : args[0];
          } else {
            y = rounded(unary_op(op.name, args[0], op.value), plan.dtype);
          }
          break;
        case OpKind::rename: y = args[0]; break;
        case OpKind::split:
          y = split_op(args[0], p.dims.at(op.in[0]).find(op.over[0]), static_cast<std::size_t>(op.value));
          break;
        case OpKind::concat: y = concat_op(args, out_dims.find(op.over[0])); break;
        case OpKind::softmax: y = rounded(softmax_op(args[0], out_dims, op.over[0]), plan.dtype); break;
        case OpKind::broadcast: {
          const Block b = block_of(dev.mesh(), plan.propagation.specs.at(op.out).spec, p.shape(op.out), dev.id());
          const Shape local = pad ? b.shape() : b.stored_shape();
          y = rounded(broadcast_to(args[0], p.dims.at(op.in[0]), out_dims, local) * op.scale, plan.dtype);
          break;
        }
        case OpKind::binary:
          y = rounded(binary_op(op.name, args[0], p.dims.at(op.in[0]), args[1], p.dims.at(op.in[1]), out_dims),
                      plan.dtype);
          break;
        case OpKind::reduce: {
          double count = 1;
          for (char c : op.over) count *= double(p.sizes.at(c));
          const Tensor& x = o.reshard[0].empty() && !pad ? held.at(op.in[0]) : args[0];
          y = rounded(reduce_op(op.name, x, p.dims.at(op.in[0]), op.over, count), plan.dtype);
          break;
        }
      }
      if (pad) y = padded_block(y, block_of(dev.mesh(), o.computed, p.shape(op.out), dev.id()));
      y = execute_steps(dev, o.finish, y);
      peak = std::max(peak, live() + extra + y.size() * eb);
      if (dev.mesh().uneven() == Uneven::pad) {  // measured, not assumed: the verifier checks it
        const Block b = block_of(dev.mesh(), plan.stored.at(op.out), p.shape(op.out), dev.id());
        dirty.push_back(padded_block(real_part(y, b), b) == y ? 0.0 : 1.0);
      }
      held[op.out] = std::move(y);
      for (const auto& t : frees[o.op]) held.erase(t);
      for (auto& kv : made) kept[kv.first] = std::move(kv.second);
      for (auto it = kept.begin(); it != kept.end();) it = copies.at(it->first) <= j ? kept.erase(it) : std::next(it);
      peak = std::max(peak, live());
    }
    Outputs out;
    for (const auto& name : p.outputs) out[name] = held.at(name);
    out["peak_bytes"] = Tensor({static_cast<double>(peak)});
    if (!dirty.empty()) {
      Tensor flags = xt::zeros<double>({dirty.size()});
      std::copy(dirty.begin(), dirty.end(), flags.begin());
      out[kPaddingDirty] = flags;
    }
    return out;
  };
}

}  // namespace shardlab
