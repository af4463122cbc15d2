// build/bin/shardlab's main, in the library: its CLI11 app compiles with the other commands
// (harness/cli is one unit in the default build) rather than in a file of its own.
#pragma once

namespace shardlab {

// Parses argv, runs the command it names, and returns the exit status (0, 1 FAIL, 2 bad input,
// 3 runtime fault).
int shardlab_main(int argc, char** argv);

}  // namespace shardlab
