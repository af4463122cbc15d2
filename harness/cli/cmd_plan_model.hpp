// `shardlab plan-model --model NAME|FILE.toml --cluster NAME|FILE.toml --devices N [--top K]
// [--json]`: the best training layouts of a whole model on a cluster (harness/jobs/job_search.hpp).
#pragma once
#include "harness/cli/command.hpp"

namespace shardlab {

Command add_plan_model_command(CLI::App& app);

}  // namespace shardlab
