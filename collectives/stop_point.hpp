// Testing the watchdog where a rank can hang: SHARDLAB_STOP_AT=<point>:<rank> makes that rank stop
// itself (SIGSTOP, as a debugger or an overloaded host would) the first time it reaches the point:
//   init       before MPI_Init (the others wait inside it)
//   start      right after MPI_Init
//   groups     before the group communicators of a run's mesh are made
//   collective its first collective step (mid-run)
//   verify     after a run, while rank 0 checks the result
//   finalize   at exit, before the goodbye and MPI_Finalize
//   goodbye    at exit, after the goodbye (every rank has finished), before the last roll call
//   mpi_finalize  at exit, right before MPI_Finalize (the others wait inside it)
// tests/mpi/stop_test.sh runs each; without the variable nothing happens.
#pragma once

namespace shardlab {

void stop_point(const char* point, int rank);

}  // namespace shardlab
