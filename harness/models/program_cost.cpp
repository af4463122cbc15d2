#include "harness/models/program_cost.hpp"

#include "core/text.hpp"
#include "core/table.hpp"
#include "harness/cost/cost.hpp"
#include "harness/cost/topology.hpp"

namespace shardlab {

double PartCost::share() const {
  const double all = comm_seconds + compute_seconds;
  return all > 0 ? comm_seconds / all : 0;
}

std::vector<PartCost> program_cost(const ProgramPlan& plan, const Hardware& hw) {
  std::vector<PartCost> parts;
  PartCost layer;
  layer.part = "layer";
  auto entry = [&](const std::string& name) -> PartCost& {
    for (auto& p : parts)
      if (p.part == name) return p;
    parts.push_back({name});
    return parts.back();
  };
  for (const auto& o : plan.ops) {
    const ProgramOp& op = plan.program.ops[o.op];
    PartCost& part = entry(op.part.empty() ? "other" : op.part);
    const double compute = o.has_contraction ? compute_seconds(o.flops_per_device, hw) : 0.0;
    part.compute_seconds += compute;
    layer.compute_seconds += compute;
    for (const PlanStep* s : o.collectives()) {
      if (plan.mesh.axes_size(s->axes) <= 1) continue;  // a group of one sends nothing
      // The whole tensor the cost model takes: the gathered result of an all_gather, else the input.
      const Shape& whole = s->kind == StepKind::all_gather ? s->local_after : s->local_before;
      std::vector<int> sizes;
      for (const auto& a : s->axes) sizes.push_back(plan.mesh.axis_size(a));
      const double seconds =
          topology_seconds(step_kind_name(s->kind), sizes, double(element_count(whole)) * hw.element_bytes, hw);
      part.comm_seconds += seconds;
      part.collectives += 1;
      layer.comm_seconds += seconds;
      layer.collectives += 1;
    }
  }
  parts.push_back(layer);
  return parts;
}

std::string program_cost_text(const std::vector<PartCost>& parts, const Hardware& hw,
                              const std::map<std::string, double>& measured) {
  std::vector<std::string> head = {"part", "collectives", "comm_ms", "compute_ms", "comm share"};
  if (!measured.empty()) head.push_back("measured");
  Table t(head);
  for (const auto& p : parts) {
    std::vector<std::string> row = {p.part, std::to_string(p.collectives), format_number(p.comm_seconds * 1e3, "%.3f"),
                                    format_number(p.compute_seconds * 1e3, "%.3f"),
                                    format_number(100 * p.share(), "%.1f") + "%"};
    if (!measured.empty()) {
      const auto it = measured.find(p.part);
      row.push_back(it == measured.end() ? "-" : format_number(100 * it->second, "%.0f") + "%");
    }
    t.add(row);
  }
  return t.text() + "  modeled on " + hw.name + ": collectives on its topology, einsum FLOPs at " +
         format_number(hw.flops_per_s / 1e12, "%.4g") + " TFLOP/s, " + format_number(hw.element_bytes, "%.0f") +
         " B per element;\n  elementwise work not counted, nothing overlapped.\n";
}

}  // namespace shardlab
