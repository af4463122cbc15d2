// `shardlab exercise [--lesson NN] [--seed N] [--answer TEXT] [--json] [--list]`: poses a sharding
// case and grades the learner's collectives and bytes against the planner's plan and the ledger of
// running it (harness/models/exercise.hpp). Exit 0 when every answer is right, 1 otherwise.
#pragma once
#include "harness/cli/command.hpp"

namespace shardlab {

Command add_exercise_command(CLI::App& app);

}  // namespace shardlab
