// `shardlab soak [--minutes M | --cases N] [--seed S] [--backend sim|mpi] [--json]`: random valid
// matmul sharding cases (mesh, specs, shape, element type) run one after another in one process,
// each verified against the unsharded product and the planner's predicted bytes, while the
// process's resident memory is watched: it must stay flat (growth under 5% after a warm-up).
// `make soak` runs it on sim and under mpiexec -n 2.
#pragma once
#include "harness/cli/command.hpp"

namespace shardlab {

Command add_soak_command(CLI::App& app);

}  // namespace shardlab
