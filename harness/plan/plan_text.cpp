// A plan for people: its steps as an aligned table with their bytes, or one summary line
// (declared in planner.hpp).
#include "harness/plan/planner.hpp"

#include "core/table.hpp"
#include "core/text.hpp"
#include "harness/plan/operands.hpp"

namespace shardlab {

std::string plan_text(const Plan& plan) {
  auto names = [&](int o) { return dim_names(o == kA ? plan.eq.a : o == kB ? plan.eq.b : plan.eq.out); };
  auto label = [&](int o) { return o == kA ? plan.a.name : o == kB ? plan.b.name : plan.result_name; };
  std::string out = "Plan for " + plan.eq.text() + " on mesh " + plan.mesh.text() + ": " +
                    plan.a.spec.notation(plan.a.name, names(kA)) + " x " + plan.b.spec.notation(plan.b.name, names(kB)) +
                    " -> " + plan.out_spec.notation(plan.result_name, names(kC)) +
                    (plan.out_given ? "" : " (no output spec given: the natural result)") + "\n";
  Table t({"#", "step", "over", "dim", "spec", "local block", "sent/device"});
  Table narrow({"#", "step", "over", "dim", "spec", "sent/device"});  // when t is wider than 100 columns
  std::string why, why_narrow;
  int i = 1;
  for (const auto& s : plan.steps) {
    const std::string& letters = s.operand == kA ? plan.eq.a : s.operand == kB ? plan.eq.b : plan.eq.out;
    std::string dim = s.dim < 0 ? "" : std::string(1, letters[s.dim]);
    if (s.to_dim >= 0) dim += ">" + std::string(1, letters[s.to_dim]);
    std::string spec, local, reason = s.reason;
    if (s.kind == StepKind::contract) {
      spec = plan.a_used.notation(plan.a.name, names(kA)) + " x " + plan.b_used.notation(plan.b.name, names(kB)) +
             " -> " + s.after.notation(label(kC), names(kC));
      local = shape_text(local_shape(plan.mesh, plan.a_used, plan.a.shape)) + " x " +
              shape_text(local_shape(plan.mesh, plan.b_used, plan.b.shape)) + " -> " + shape_text(s.local_after);
      reason = std::to_string(static_cast<long long>(s.flops)) + " FLOPs per device (" +
               std::to_string(static_cast<long long>(plan.unsharded_flops())) + " unsharded); " + s.reason;
    } else {
      spec = s.before.notation(label(s.operand), names(s.operand)) + " -> " +
             s.after.notation(label(s.operand), names(s.operand));
      local = shape_text(s.local_before) + " -> " + shape_text(s.local_after);
    }
    const std::string what = s.kind == StepKind::contract ? "contract" : step_kind_name(s.kind) + " " + s.tensor;
    t.add({std::to_string(i), what, axes_text(s.axes), dim, spec, local, std::to_string(s.predicted_bytes)});
    narrow.add({std::to_string(i), what, axes_text(s.axes), dim, spec, std::to_string(s.predicted_bytes)});
    why += "  " + std::to_string(i) + ". " + reason + "\n";
    why_narrow += "  " + std::to_string(i++) + ". local block " + local + "; " + reason + "\n";
  }
  const std::string wide = t.text();
  // The header line spans every column (each is padded to its widest cell): its length is the table's.
  out += wide.find('\n') > 100 ? narrow.text() + why_narrow : wide + why;
  out += "  predicted: " + std::to_string(plan.predicted_bytes_per_device()) + " bytes sent per device in " +
         std::to_string(plan.collectives().size()) + " collective" + (plan.collectives().size() == 1 ? "" : "s") +
         " (" + std::to_string(plan.element_bytes) + " B per element)\n";
  return out;
}

std::string plan_summary(const Plan& plan) {
  std::vector<std::string> parts;
  for (const auto& s : plan.steps) {
    if (s.kind == StepKind::contract) parts.push_back("contract " + plan.eq.text());
    else parts.push_back(step_kind_name(s.kind) + " " + s.tensor + " over " + axes_text(s.axes) +
                         (s.to_dim >= 0 ? " from dim " + std::to_string(s.dim) + " to dim " + std::to_string(s.to_dim)
                          : s.dim >= 0  ? " along dim " + std::to_string(s.dim)
                                        : ""));
  }
  return join(parts, "; ");
}

}  // namespace shardlab
