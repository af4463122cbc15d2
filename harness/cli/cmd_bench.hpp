// `shardlab bench collectives`: see harness/bench/bench.hpp.
#pragma once
#include "harness/cli/command.hpp"

namespace shardlab {

Command add_bench_command(CLI::App& app);

}  // namespace shardlab
