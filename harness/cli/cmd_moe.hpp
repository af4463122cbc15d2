// `shardlab moe [--mesh X=2,Y=2] [--experts 8] [--top-k 2] [--capacity-factor 1.0] [--json]
// [--trace FILE] [--inject KIND] [--inputs F.npz] [--save G.npz]`: lesson 20's mixture of experts
// run and verified (harness/models/moe_run.hpp): the load per expert device, drops, the
// collectives' bytes against the formula, and the verdict against the unsharded MoE; on tensors of
// the user's own, with the routing and results saved (harness/models/moe_io.hpp).
#pragma once
#include "harness/cli/command.hpp"

namespace shardlab {

Command add_moe_command(CLI::App& app);

}  // namespace shardlab
