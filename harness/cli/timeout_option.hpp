// --collective-timeout SECONDS, the collective watchdog's limit (collectives/watchdog.hpp), on any
// CLI11 app: lessons (harness/cli/cli.cpp) and every shardlab command that runs devices.
// A value that is not a positive number is a parse error: one sentence, exit 2.
#pragma once

namespace CLI {
class App;
}

namespace shardlab {

// Sets `seconds` and the process-wide limit when the flag is given.
void add_collective_timeout(CLI::App* app, double& seconds);
// For commands without CommonOptions: the process-wide limit only.
void add_collective_timeout(CLI::App* app);

}  // namespace shardlab
