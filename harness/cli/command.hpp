// A `shardlab` subcommand kept in its own file: add_<name>_command(app) registers it (and its
// options) on the CLI11 app and returns the function that main calls after parsing when `*app`
// was chosen. CLI11 stays out of this header: it is slow to compile.
#pragma once
#include <functional>

namespace CLI {
class App;
}

namespace shardlab {

struct Command {
  CLI::App* app = nullptr;  // the subcommand; true when the command line chose it
  std::function<int()> run; // returns the exit status
};

}  // namespace shardlab
