#include "collectives/mpi_watchdog.hpp"

#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <thread>

#include "collectives/watchdog.hpp"

namespace shardlab {

namespace {
using Clock = std::chrono::steady_clock;
std::atomic<int> watched_rank{0};
std::atomic<MpiStage> watched_stage{MpiStage::starting};

// The blocking call being watched: since when (steady_clock ticks; 0: none), its limit and its
// sentence. Atomics, not a lock: a guard sits inside bench's timed MPICH calls. Once the watchdog
// decides to fire it sets `firing` and looks at `since` again; a guard that ends meanwhile waits
// in its destructor until the watchdog has either let go or ended the process, so the sentence
// the watchdog reads is never freed under it.
std::atomic<std::int64_t> watched_since{0};
std::atomic<double> watched_seconds{0};
std::atomic<const std::string*> watched_what{nullptr};
std::atomic<bool> firing{false};

// Asks mpiexec (hydra, over the PMI-1 socket it passed in PMI_FD) to end the job with `status`:
// the message MPI_Abort itself sends, so hydra kills every rank, a stopped one too, and exits with
// `status`. False when there is no such socket.
bool ask_launcher_to_abort(int status) {
  const char* fd = std::getenv("PMI_FD");
  if (!fd) return false;
  const std::string command = "cmd=abort exitcode=" + std::to_string(status) + "\n";
  return ::write(std::atoi(fd), command.data(), command.size()) == static_cast<ssize_t>(command.size());
}

// Ends the job with `status`. While MPI runs, MPI_Abort (it prints a line of its own, "Abort(3) on
// node 0 ...": one sentence is the rule, so stderr goes first). Before MPI_Init has returned there
// is no MPI to abort, and once MPI_Finalize has begun MPI_Abort may wait on the finalize: then the
// abort goes to mpiexec directly. A rank that only exited would not do: hydra combines the
// statuses of every rank, and with a stopped rank killed that made 9 of 3.
[[noreturn]] void end_job(int status) {
  const int null = ::open("/dev/null", O_WRONLY);
  if (null >= 0) ::dup2(null, 2);
  if (watched_stage.load() == MpiStage::running) MPI_Abort(MPI_COMM_WORLD, status);
  if (ask_launcher_to_abort(status)) std::this_thread::sleep_for(std::chrono::seconds(5));  // to be killed
  ::_exit(status);
}

void watch_blocking_calls() {
  for (;;) {
    const std::int64_t since = watched_since.load();
    const double seconds = since ? watched_seconds.load() : collective_timeout();
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(0.1, seconds / 10)));
    if (since == 0 || watched_since.load() != since) continue;
    const double waited =
        std::chrono::duration<double>(Clock::now().time_since_epoch() - Clock::duration(since)).count();
    if (waited < seconds) continue;
    firing.store(true);
    if (watched_since.load() != since) {  // the call returned meanwhile
      firing.store(false);
      continue;
    }
    mpi_fault_exit("collective timeout (--collective-timeout " + seconds_text(collective_timeout()) + "): device " +
                       std::to_string(watched_rank.load()) + " waited " + seconds_text(waited) + " inside " +
                       *watched_what.load(),
                   500);
  }
}
}  // namespace

void mpi_fault_exit(const std::string& sentence, int linger_ms) {
  std::fprintf(stderr, "%s\n", sentence.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  if (linger_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(linger_ms));
  end_job(3);
}

void mpi_harness_timeout(int rank, double waited, const std::string& what) {
  mpi_fault_exit("collective timeout (--collective-timeout " + seconds_text(collective_timeout()) + "): device " +
                     std::to_string(rank) + " waited " + seconds_text(waited) + " " + what + ", in vain",
                 500);
}

void mpi_watch_as(int rank, MpiStage stage) {
  watched_rank.store(rank);
  watched_stage.store(stage);
}

std::string mpi_devices(const std::vector<int>& ids) {
  std::string text = ids.size() == 1 ? "device " : "devices ";
  for (std::size_t i = 0; i < ids.size(); ++i) text += (i ? ", " : "") + std::to_string(ids[i]);
  return text;
}

std::string mpi_waiting_for(const std::vector<int>& others) {
  return mpi_devices(others) + (others.size() == 1 ? ", which has not arrived" : ", not all of whom have arrived");
}

BlockingCall::BlockingCall(const std::string& what) : BlockingCall(what, collective_timeout()) {}

BlockingCall::BlockingCall(const std::string& what, double seconds) {
  static const bool started = [] {
    std::thread(watch_blocking_calls).detach();
    return true;
  }();
  (void)started;
  watched_what.store(&what);
  watched_seconds.store(seconds);
  watched_since.store(Clock::now().time_since_epoch().count());
}

BlockingCall::~BlockingCall() {
  watched_since.store(0);
  while (firing.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // see firing
}

}  // namespace shardlab
