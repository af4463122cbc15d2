// `shardlab matmul` and `shardlab einsum`: plan a contraction from the operands' specs (see
// harness/plan/planner.hpp), run the plan on the sim or MPI mesh, and verify the assembled result
// against the unsharded einsum. Inputs come from .npy files or from seeded random integers; the
// result goes to a .npy file only when it verified.
#pragma once
#include "harness/cli/command.hpp"

namespace shardlab {

Command add_matmul_command(CLI::App& app);
Command add_einsum_command(CLI::App& app);

}  // namespace shardlab
