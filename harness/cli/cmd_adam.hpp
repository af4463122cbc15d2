// `shardlab adam [--inputs F.npz] [--step T] [--lr 0.01] [--beta1 0.9] [--beta2 0.999] [--eps 1e-8]
// [--save G.npz] [--json]`: one Adam step, as lessons 15 and 17 take it, on parameters, gradients and
// moments of the user's own (harness/models/adam_step.hpp), checked against Adam written plainly;
// --save writes the parameters and moments after it.
#pragma once
#include "harness/cli/command.hpp"

namespace shardlab {

Command add_adam_command(CLI::App& app);

}  // namespace shardlab
