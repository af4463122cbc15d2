// The FFN run's report: the collectives against the plan, the table of the run's collectives, the
// memory and FLOPs text and the report's fields (harness/models/ffn.hpp).
#include <cmath>
#include <sstream>

#include "core/table.hpp"
#include "core/text.hpp"
#include "harness/check/plan_ledger.hpp"
#include "harness/models/ffn.hpp"

namespace shardlab {

std::string ffn_plan_vs_ledger(const FfnPlan& plan, const std::vector<CollectiveSummary>& run) {
  Plan all;
  for (const auto& s : plan.stages) {
    const auto& steps = s.kind == FfnStage::Kind::contraction ? s.plan.steps : s.steps;
    all.steps.insert(all.steps.end(), steps.begin(), steps.end());
  }
  return plan_vs_ledger(all, run);
}

std::string ffn_collectives_table(const FfnResult& r) {
  if (r.collectives.empty()) return "  no collectives: 0 bytes moved between devices\n";
  Table t({"#", "pass", "collective", "over", "tensor", "group", "bytes/device", "predicted", "match"});
  for (std::size_t i = 0; i < r.collectives.size(); ++i) {
    const auto& c = r.collectives[i];
    t.add({std::to_string(i + 1), i < r.forward_collectives ? "forward" : "backward", c.op, c.axes, c.tensor,
           std::to_string(c.group_size), measured_cell(c), std::to_string(c.predicted_bytes_per_device),
           match_cell(c)});
  }
  return t.text();
}

std::string ffn_memory_text(const FfnResult& r) {
  const FfnPlan& p = r.plan;
  const int n = p.mesh.devices();
  auto ratio = [](double a, double b) { return b > 0 ? shortest(std::round(a / b * 1000) / 1000) : "-"; };
  std::ostringstream o;
  o << "  memory per device: held " << human_bytes(static_cast<double>(r.stored_bytes_per_device)) << ", peak "
    << human_bytes(static_cast<double>(r.peak_bytes_per_device)) << " with the short-lived gathered copies\n"
    << "  unsharded layer:   held " << human_bytes(static_cast<double>(p.unsharded_stored_bytes)) << ", peak "
    << human_bytes(static_cast<double>(p.unsharded_peak_bytes)) << "; per device / unsharded = "
    << ratio(static_cast<double>(r.stored_bytes_per_device), static_cast<double>(p.unsharded_stored_bytes))
    << " held, " << ratio(static_cast<double>(r.peak_bytes_per_device), static_cast<double>(p.unsharded_peak_bytes))
    << " peak (1/" << n << " = " << ratio(1, n) << ")\n"
    << "  FLOPs per device:  " << shortest(p.flops_per_device()) << " of " << shortest(p.unsharded_flops()) << " unsharded = 1/"
    << shortest(p.unsharded_flops() / p.flops_per_device()) << " of the matmul work"
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
