// The plot of a whole-job search (`shardlab sweep --what plan`, plots/plan_model.gp): every layout
// searched for one model on one cluster, its memory per device against its step time, in blocks:
// the layouts that fit, those that do not, and the planner's choice.
#pragma once
#include <string>

#include "harness/models/sweep.hpp"

namespace shardlab {

DatTable plan_model_sweep(const std::string& model = "gpt3-175b", const std::string& cluster = "dgx-a100",
                          int devices = 1024);

}  // namespace shardlab
