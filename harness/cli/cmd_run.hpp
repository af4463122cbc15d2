// `shardlab run FILE.toml`: one case file (harness/check/case_file.hpp) end to end: the program,
// every tensor's spec and where it came from, the plan of each op, the run's ledger, memory, each
// check and the verdict. See harness/models/case_run.hpp.
#pragma once
#include "harness/cli/command.hpp"

namespace shardlab {

Command add_run_command(CLI::App& app);

}  // namespace shardlab
