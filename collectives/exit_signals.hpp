// Ctrl-C and kill: SIGINT exits 130 and SIGTERM 143 (128 + the signal, as shells report them), at
// once, from the signal handler (_exit: async-signal-safe; nothing is flushed).
//
// Under mpiexec every rank gets the signal, but an _exit without MPI_Finalize is a rank whose
// status MPICH 4.0.2's hydra may report as 0 (the proxy sees the rank's PMI connection close and
// presets its status before reaping it: 7 of 12 plain C MPI programs interrupted so made mpiexec
// return 0). An MPI_Abort's code it reports every time (12 of 12). So while MPI is up, the handler
// only hands the signal to a thread (hand_signals_to) that ends the job with MPI_Abort(128 + the
// signal); a second signal, or one before MPI_Init or after MPI_Finalize begins, exits at once.
#pragma once

namespace shardlab {

void exit_on_signals();  // call early in main; idempotent

// From now on the first SIGINT or SIGTERM writes its number, one byte, to `fd` instead of ending
// the process (the reader ends it); -1 goes back to ending it in the handler.
void hand_signals_to(int fd);

}  // namespace shardlab
