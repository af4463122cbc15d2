// `shardlab nested [--mesh X=4,Y=4] [--batch 64] [--vocab 32] [--model 8] [--hidden 16]
// [--experts 8] [--top-k 2] [--capacity-factor 2] [--layers 4] [--json] ...`: article 002's nested
// mesh run as one model (harness/jobs/nested.hpp): which axis does what in each part, the bytes of
// each part against formulas, and the verdict against the unsharded model.
#pragma once
#include "harness/cli/command.hpp"

namespace shardlab {

Command add_nested_command(CLI::App& app);

}  // namespace shardlab
