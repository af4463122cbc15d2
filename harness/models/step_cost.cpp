#include "harness/models/step_cost.hpp"

#include <cstdio>

#include "collectives/predict.hpp"
#include "core/text.hpp"
#include "harness/cost/cost.hpp"
#include "harness/cost/topology.hpp"
#include "core/table.hpp"

namespace shardlab {

double StepCost::share() const {
  const double all = comm_seconds + compute_seconds;
  return all > 0 ? comm_seconds / all : 0;
}

namespace {

// The whole tensor n of collective_seconds: the gathered result for all_gather, the input for
// reduce_scatter and all_reduce.
double modeled_bytes(const PlanStep& s, const Hardware& hw) {
  const Shape& whole = s.kind == StepKind::all_gather ? s.local_after : s.local_before;
  return double(element_count(whole)) * hw.element_bytes;
}

}  // namespace

StepCost ffn_step_cost(const FfnPlan& p, bool backward, const Hardware& hw) {
  StepCost c;
  for (const auto& st : p.stages) {
    if (st.phase == FfnPhase::backward && !backward) continue;
    if (st.kind == FfnStage::Kind::contraction) c.compute_seconds += compute_seconds(st.plan.flops_per_device(), hw);
    for (const PlanStep* s : st.collectives()) {
      if (p.mesh.axes_size(s->axes) <= 1) continue;  // a group of one sends nothing
      CollectiveCost k;
      k.phase = st.phase;
      k.op = step_kind_name(s->kind);
      k.tensor = s->tensor;
      k.axes = axes_text(s->axes);
      k.group = p.mesh.axes_size(s->axes);
      k.n_bytes = modeled_bytes(*s, hw);
      const auto element = static_cast<std::size_t>(hw.element_bytes);
      k.sent_bytes = double(predicted_bytes_sent(k.op, k.group, element_count(s->local_before) * element, element));
      std::vector<int> sizes;
      for (const auto& a : s->axes) sizes.push_back(p.mesh.axis_size(a));
      k.seconds = topology_seconds(k.op, sizes, k.n_bytes, hw);
      c.comm_seconds += k.seconds;
      c.collectives.push_back(k);
    }
  }
  return c;
}

StepCost ffn_step_cost(const std::string& strategy, const std::string& mesh, const std::string& dims, bool backward,
                       const Hardware& hw) {
  FfnConfig c;
  c.strategy = strategy;
  c.dims = parse_ffn_dims(dims);
  c.backward = true;
  return ffn_step_cost(plan_ffn(Mesh::parse(mesh), c), backward, hw);
}

std::string step_cost_text(const StepCost& cost, const Hardware& hw) {
  Table t({"phase", "collective", "tensor", "over", "n", "size", "sent", "modeled_us"});
  for (const auto& k : cost.collectives)
    t.add({phase_name(k.phase), k.op, k.tensor, k.axes, std::to_string(k.group), human_bytes(k.n_bytes),
           human_bytes(k.sent_bytes), format_number(k.seconds * 1e6, "%.1f")});
  std::string out = cost.collectives.empty() ? "  (no collectives)\n" : t.text();
  if (!cost.collectives.empty())
    out += "  size: the whole tensor on each device of the group (after an all_gather, before the others);\n"
           "  sent: what one device sends over a ring of n: (n-1)/n of size, 2(n-1)/n for all_reduce\n";
  out += "  communication " + format_number(cost.comm_seconds * 1e3, "%.3f") + " ms + compute " +
         format_number(cost.compute_seconds * 1e3, "%.3f") + " ms (matmul FLOPs at " + format_number(hw.flops_per_s / 1e12, "%.4g") +
         " TFLOP/s):\n  communication is " + format_number(100 * cost.share(), "%.1f") + "% of the step (collectives on its " +
         topology_text(hw) + ",\n  " +
         format_number(hw.element_bytes, "%.0f") + " B per element, nothing overlapped)\n";
  return out;
}

}  // namespace shardlab
