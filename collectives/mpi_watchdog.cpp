#include "collectives/mpi_watchdog.hpp"

#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "collectives/mpi_world.hpp"
#include "collectives/watchdog.hpp"

namespace shardlab {

const std::string kFinalizing = "MPI_Finalize (the exit handshake)";
const double kFinalizeSeconds = 10;  // a finalize after every goodbye takes well under 1 s
std::atomic<int> exit_status{0};  // what the program exits with, once leave() has begun

namespace {
// Ends the job: every rank, mpiexec with `status` where hydra passes it on. MPI_Abort prints a
// line of its own ("Abort(3) on node 0 ..."): one sentence is the rule, so stderr goes first.
[[noreturn]] void abort_job(int status) {
  const int null = ::open("/dev/null", O_WRONLY);
  if (null >= 0) ::dup2(null, 2);
  MPI_Abort(MPI_COMM_WORLD, status);
  ::_exit(status);
}
}  // namespace

void mpi_fault_exit(const std::string& sentence, int linger_ms) {
  std::fprintf(stderr, "%s\n", sentence.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  if (linger_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(linger_ms));
  abort_job(3);
}

void mpi_harness_timeout(int rank, double waited, const std::string& what) {
  mpi_fault_exit("collective timeout (--collective-timeout " + seconds_text(collective_timeout()) + "): device " +
                     std::to_string(rank) + " waited " + seconds_text(waited) + " " + what + ", in vain",
                 500);
}

namespace {
using Clock = std::chrono::steady_clock;
std::atomic<std::int64_t> blocked_since{0};  // steady_clock ticks when a BlockingCall began; 0: none
std::atomic<const std::string*> blocked_in{nullptr};

// MPI_Finalize stuck after every rank's goodbye: the run is over and its status settled. Each rank
// says so on stderr; the others exit with that status, and rank 0, a second later, ends whatever is
// left (a rank stopped after its goodbye) with it. mpiexec's exit is then hydra's (255 or 5).
[[noreturn]] void finalize_hang(double waited) {
  const int status = exit_status.load(std::memory_order_relaxed), rank = MpiProcess::get().rank();
  std::fprintf(stderr, "note: device %d: MPI_Finalize hung %.0f s after every goodbye; ending with status %d\n",
               rank, waited, status);
  std::fflush(nullptr);
  if (rank != 0) std::_Exit(status);
  abort_job(status);
}

void watch_blocking_calls() {
  for (;;) {
    const double limit = blocked_in.load(std::memory_order_acquire) == &kFinalizing
                             ? std::min(collective_timeout(), kFinalizeSeconds) + (MpiProcess::get().rank() == 0 ? 1 : 0)
                             : collective_timeout();
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(0.1, limit / 10)));
    const std::int64_t since = blocked_since.load(std::memory_order_acquire);
    if (since == 0) continue;
    const double waited =
        std::chrono::duration<double>(Clock::now().time_since_epoch() - Clock::duration(since)).count();
    const std::string* what = blocked_in.load(std::memory_order_acquire);
    if (waited < limit || blocked_since.load(std::memory_order_acquire) != since || !what) continue;
    if (what == &kFinalizing) finalize_hang(waited);
    mpi_fault_exit("collective timeout (--collective-timeout " + seconds_text(limit) + "): device " +
                       std::to_string(MpiProcess::get().rank()) + " waited " + seconds_text(waited) + " inside " +
                       *what + ", not all of whom have arrived",
                   500);
  }
}
}  // namespace

BlockingCall::BlockingCall(const std::string& what) {
  static const bool started = [] {
    std::thread(watch_blocking_calls).detach();
    return true;
  }();
  (void)started;
  blocked_in.store(&what, std::memory_order_release);
  blocked_since.store(Clock::now().time_since_epoch().count(), std::memory_order_release);
}

BlockingCall::~BlockingCall() { blocked_since.store(0, std::memory_order_release); }

}  // namespace shardlab
