// `shardlab sweep`: writes plot-ready .dat files for plots/*.gp; see harness/models/sweep.hpp.
#pragma once
#include "harness/cli/command.hpp"

namespace shardlab {

Command add_sweep_command(CLI::App& app);

}  // namespace shardlab
