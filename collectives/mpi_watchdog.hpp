// The mpi backend's watchdog: how a rank ends the job when a wait lasts past the collective
// timeout (collectives/watchdog.hpp). A rank prints one sentence (what it waited in, for whom), and
// ends the job with MPI_Abort(MPI_COMM_WORLD, 3): mpiexec exits 3 and kills every rank, a stopped
// one too. Waits that poll check their own Deadline; a call that blocks inside MPICH is watched by a
// thread (BlockingCall).
#pragma once
#include <atomic>
#include <string>

namespace shardlab {

// A runtime fault: `sentence` on stderr, a pause of `linger_ms` (so other ranks can print theirs),
// then MPI_Abort(MPI_COMM_WORLD, 3) with MPICH's own abort line kept off stderr.
[[noreturn]] void mpi_fault_exit(const std::string& sentence, int linger_ms);
// The sentence of a harness wait past the collective timeout: `what` says for what.
[[noreturn]] void mpi_harness_timeout(int rank, double waited, const std::string& what);

// A call that blocks inside MPICH (bench collectives' timed MPI_Allreduce and the like) cannot
// poll a deadline; while one of these guards lives, a watchdog thread does: past the collective
// timeout it prints the sentence (`what`: the call) and aborts the job, exit 3. Costs a clock read
// and two atomic stores; `what` must outlive the guard.
class BlockingCall {
 public:
  explicit BlockingCall(const std::string& what);
  ~BlockingCall();
  BlockingCall(const BlockingCall&) = delete;
  BlockingCall& operator=(const BlockingCall&) = delete;
};

// Shared with MpiProcess::leave: the BlockingCall name of the exit's MPI_Finalize, and the status
// the program exits with once leave() has begun.
extern const std::string kFinalizing;
extern const double kFinalizeSeconds;
extern std::atomic<int> exit_status;

}  // namespace shardlab
