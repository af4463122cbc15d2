// `shardlab check PATH... [--junit FILE] [--backend]`: every case file given (directories are
// searched for *.toml, recursively), one line each and a last line "N passed, N failed"; with
// --junit, JUnit XML (harness/check/junit.hpp). Exit 0 when all pass, 1 when a check failed, 2
// when a file is invalid (the others still run and are reported; the invalid file is an error).
#pragma once
#include "harness/cli/command.hpp"

namespace shardlab {

Command add_check_command(CLI::App& app);

}  // namespace shardlab
