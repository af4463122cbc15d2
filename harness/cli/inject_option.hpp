// --inject KIND (collectives/fault.hpp) on any CLI11 app that runs devices: lessons
// (harness/cli/cli.cpp) and shardlab matmul, einsum, ffn, run and pipeline. A kind the harness
// does not plant is a parse error: one sentence, exit 2.
#pragma once
#include <string>

namespace CLI {
class App;
}

namespace shardlab {

void add_inject_option(CLI::App* app, std::string& inject);

}  // namespace shardlab
