// The mpi backend's watchdog: how a rank ends the job when a wait lasts past the collective timeout
// (collectives/watchdog.hpp), from MPI_Init to MPI_Finalize. The rank prints one sentence (what it
// waited in, for whom) and the job ends with exit status 3; mpiexec kills every rank, a stopped one
// too. Waits that poll check their own Deadline and say whom they wait for; a call that blocks
// inside MPICH (MPI_Init, making communicators, MPICH's own collectives, MPI_Finalize) is watched
// by a thread while a BlockingCall guard lives.
#pragma once
#include <string>
#include <vector>

namespace shardlab {

// A runtime fault: `sentence` on stderr, a pause of `linger_ms` (so other ranks can print theirs),
// then the job ends with status 3 (MPI_Abort(MPI_COMM_WORLD, 3), MPICH's own abort line kept off
// stderr; before MPI_Init has returned, or once MPI_Finalize has begun, the process exits 3, and
// mpiexec ends the others).
[[noreturn]] void mpi_fault_exit(const std::string& sentence, int linger_ms);
// The sentence of a harness wait past the collective timeout: `what` says for what.
[[noreturn]] void mpi_harness_timeout(int rank, double waited, const std::string& what);

// Where this process is in its MPI life, which decides how a fault ends the job.
enum class MpiStage { starting, running, finishing };
// Set by MpiProcess: this process's rank (known from mpiexec before MPI_Init) and its stage.
void mpi_watch_as(int rank, MpiStage stage);

// "device 1" or "devices 1, 2, 3".
std::string mpi_devices(const std::vector<int>& ids);
// "device 1, which has not arrived" or "devices 0, 2, 3, not all of whom have arrived": the other
// members of a blocking call, for its sentence.
std::string mpi_waiting_for(const std::vector<int>& others);

// A call that blocks inside MPICH cannot poll a deadline; while one of these guards lives, a
// watchdog thread does. Past `seconds` it prints "collective timeout (...): device R waited W s
// inside <what>" and ends the job (mpi_fault_exit). Costs a clock read and a few atomic stores;
// `what` must outlive the guard. One guard at a time.
class BlockingCall {
 public:
  explicit BlockingCall(const std::string& what);
  BlockingCall(const std::string& what, double seconds);
  ~BlockingCall();
  BlockingCall(const BlockingCall&) = delete;
  BlockingCall& operator=(const BlockingCall&) = delete;
};

}  // namespace shardlab
