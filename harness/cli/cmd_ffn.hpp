// `shardlab ffn`: one FFN sharding strategy end to end, forward (and with --backward the gradients):
// collectives derived by the planner, bytes per device measured and predicted, memory per device,
// and the verdicts against the unsharded layer. See harness/models/ffn.hpp.
#pragma once
#include "harness/cli/command.hpp"

namespace shardlab {

Command add_ffn_command(CLI::App& app);

}  // namespace shardlab
