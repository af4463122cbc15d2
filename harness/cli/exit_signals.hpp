// Ctrl-C and kill: SIGINT exits 130 and SIGTERM 143 (128 + the signal, as shells report them), at
// once, from the signal handler (_exit: async-signal-safe; nothing is flushed). Under mpiexec
// both reach every rank, and a rank that ends this way makes mpiexec stop the others.
#pragma once

namespace shardlab {

void exit_on_signals();  // call early in main; idempotent

}  // namespace shardlab
