// `shardlab bench collectives`: see harness/bench.hpp.
#pragma once
#include "harness/command.hpp"

namespace shardlab {

Command add_bench_command(CLI::App& app);

}  // namespace shardlab
