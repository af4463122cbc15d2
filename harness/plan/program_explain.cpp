#include "harness/plan/program_explain.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "core/error.hpp"
#include "core/table.hpp"
#include "core/wrap.hpp"
#include "harness/plan/layout_search.hpp"
#include "harness/plan/plan_search.hpp"
#include "harness/plan/search_text.hpp"

namespace shardlab {

namespace {

// The op that reads or makes each step: "op 11 (q = einsum bsm,mnd->bsnd)".
std::map<const PlanStep*, std::size_t> step_ops(const ProgramPlan& plan) {
  std::map<const PlanStep*, std::size_t> out;
  for (const auto& o : plan.ops)
    for (const auto* s : o.collectives()) out[s] = o.op;
  return out;
}

}  // namespace

std::vector<std::pair<Spec, std::size_t>> layout_alternatives(const ProgramPlan& plan, const std::string& tensor,
                                                              std::size_t limit) {
  const TensorProgram& p = plan.program;
  const Spec planned = plan.propagation.specs.at(tensor).spec;
  // The renames that lie as `tensor` does (x_t = rename(x)) move with it: the same blocks.
  std::vector<std::string> group = {tensor};
  for (const auto& op : p.ops)
    if (op.kind == OpKind::rename && std::find(group.begin(), group.end(), op.in[0]) != group.end() &&
        plan.propagation.specs.at(op.out).spec == plan.propagation.specs.at(op.in[0]).spec)
      group.push_back(op.out);
  std::vector<std::pair<Spec, std::size_t>> out = {{planned, plan.predicted_bytes_per_device()}};
  for (const Spec& s : all_layouts(plan.mesh, p.shape(tensor))) {
    if (without_unit_axes(plan.mesh, s) == without_unit_axes(plan.mesh, planned)) continue;
    Propagation prop = plan.propagation;
    for (const auto& t : group) prop.specs.at(t).spec = s;
    try {
      const ProgramPlan alt = plan_tensor_program(p, plan.mesh, prop, plan.dtype, plan.article, plan.backward_from,
                                                  plan.keep_gathered);
      out.push_back({s, alt.predicted_bytes_per_device()});
    } catch (const Error&) {  // no plan reaches it: not an alternative
    }
  }
  std::stable_sort(out.begin() + 1, out.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
  if (limit > 0 && out.size() > limit) out.resize(limit);
  return out;
}

std::string program_explain_text(const ProgramPlan& plan) {
  const TensorProgram& p = plan.program;
  const auto by_op = step_ops(plan);
  std::vector<std::string> order;
  std::map<std::string, std::vector<const PlanStep*>> moves;
  for (const auto* s : plan.collectives()) {
    if (!moves.count(s->tensor)) order.push_back(s->tensor);
    moves[s->tensor].push_back(s);
  }
  std::string out =
      "Why each moved tensor lies where it does (--explain). Alternatives: the whole program's bytes\n"
      "per device with that tensor laid out otherwise, everything else as planned (bytes only: a\n"
      "layout that sends less may hold more, as a gathered activation kept for the backward does):\n";
  if (order.empty()) out += "  nothing moves: every op runs on the blocks its operands already hold\n";
  for (const auto& t : order) {
    const bool known = plan.propagation.specs.count(t) > 0;
    const std::string dims = p.dims.count(t) ? p.dims.at(t) : "";
    out += "  " + t + (dims.empty() ? "" : "[" + dims + "]");
    if (known) {
      const PropagatedSpec& s = plan.propagation.specs.at(t);
      const Spec& stored = plan.stored.count(t) ? plan.stored.at(t) : s.spec;
      out += " lies as " + stored.text() + (stored == s.spec ? "" : " (partial sums; then " + s.spec.text() + ")") +
             ": " + s.origin + "\n";
    } else {
      out += ", a copy an op makes\n";
    }
    for (const auto* s : moves.at(t)) {
      const std::size_t i = by_op.at(s);
      out += "    " + step_kind_name(s->kind) + " over " + axes_text(s->axes) + " for " + op_label(p, i) + ": " +
             s->before.text() + " -> " + s->after.text() + ", " + std::to_string(s->predicted_bytes) + " B\n";
    }
    if (!known || !p.dims.count(t)) continue;
    const auto alts = layout_alternatives(plan, t, 6);
    std::string line = "    alternatives:";
    for (std::size_t k = 0; k < alts.size(); ++k)
      line += std::string(k ? "," : "") + " " + alts[k].first.text() + " " + std::to_string(alts[k].second) + " B" +
              (k == 0 ? " (planned)" : "");
    if (alts.size() == 1) line += " (no other layout of " + t + " can be planned)";
    out += line + "\n";
  }
  return wrap_lines(out, 100, Hang::indent);
}

std::string program_plan_text(const ProgramPlan& plan) {
  // One row per step: the op's number on its first row; the step's kind (contract, gelu, a
  // collective) and the tensor it makes or moves. The op's own output is the tensor of its compute
  // row, so it is not repeated in a column of its own (long names kept the table over 100 columns).
  Table t({"op", "step", "tensor", "over", "spec", "sent/device"});
  for (const auto& o : plan.ops) {
    const ProgramOp& op = plan.program.ops[o.op];
    const std::string label = std::to_string(o.op + 1);
    bool first = true;
    auto row = [&](const std::string& step, const std::string& tensor, const std::string& over, const std::string& spec,
                   const std::string& bytes) {
      t.add({first ? label : "", step, tensor, over, spec, bytes});
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

}  // namespace shardlab
