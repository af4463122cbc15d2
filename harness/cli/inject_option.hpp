// --inject KIND (collectives/fault.hpp) and --replay on|off (collectives/replay.hpp) on any CLI11
// app that runs devices: lessons (harness/cli/cli.cpp) and shardlab matmul, einsum, ffn, run and
// pipeline. A kind the harness does not plant is a parse error: one sentence, exit 2.
#pragma once
#include <string>

#include "harness/check/options.hpp"

namespace CLI {
class App;
}

namespace shardlab {

void add_inject_option(CLI::App* app, CommonOptions& common);

}  // namespace shardlab
