#include "harness/check/plan_ledger.hpp"

#include <algorithm>

#include "core/text.hpp"

namespace shardlab {

std::string plan_vs_ledger(const Plan& plan, const std::vector<CollectiveSummary>& run) {
  return steps_vs_ledger(plan.collectives(), run);
}

std::string steps_vs_ledger(const std::vector<const PlanStep*>& steps, const std::vector<CollectiveSummary>& run) {
  const std::size_t n = std::min(steps.size(), run.size());
  for (std::size_t i = 0; i < n; ++i) {
    const PlanStep& s = *steps[i];
    const CollectiveSummary& r = run[i];
    const std::string want = step_kind_name(s.kind) + " of " + s.tensor + " over " + axes_text(s.axes);
    const std::string got = r.op + " of " + r.tensor + " over " + r.axes;
    if (want != got)
      return "collective " + std::to_string(i + 1) + ": the plan has " + want + ", the run did " + got;
    const std::size_t bytes = r.modeled ? r.predicted_bytes_per_device : r.bytes_per_device;
    if (bytes != s.predicted_bytes)
      return "collective " + std::to_string(i + 1) + " (" + want + ") sent " + std::to_string(bytes) +
             " bytes per device; the plan predicted " + std::to_string(s.predicted_bytes);
  }
  if (steps.size() != run.size())
    return "the plan has " + std::to_string(steps.size()) + " collectives, the run made " + std::to_string(run.size());
  return "";
}

}  // namespace shardlab
