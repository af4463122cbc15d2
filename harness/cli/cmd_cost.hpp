// `shardlab cost`: the cost model (harness/cost/cost.hpp) in a terminal: the hardware presets and their
// sources, and the modeled time of collectives on a group, ring against recursive doubling.
#pragma once
#include "harness/cli/command.hpp"

namespace shardlab {

Command add_cost_command(CLI::App& app);

}  // namespace shardlab
