// A plan beside the ledger of its run: the check that every collective the run made is the one
// the plan predicted (op, tensor, axes), with the bytes per device it predicted.
#pragma once
#include <string>
#include <vector>

#include "harness/check/report.hpp"
#include "harness/plan/planner.hpp"

namespace shardlab {

// Empty when the run's collectives are exactly the plan's communicating steps, in order, each
// with the op, axes, tensor and bytes per device the plan predicted; otherwise the first
// difference in words.
std::string plan_vs_ledger(const Plan& plan, const std::vector<CollectiveSummary>& run);
// The same for any list of communicating steps, in run order (a whole program's).
std::string steps_vs_ledger(const std::vector<const PlanStep*>& steps, const std::vector<CollectiveSummary>& run);

}  // namespace shardlab
