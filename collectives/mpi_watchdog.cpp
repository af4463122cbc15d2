#include "collectives/mpi_watchdog.hpp"

#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "collectives/watchdog.hpp"

namespace shardlab {

namespace {
using Clock = std::chrono::steady_clock;
std::atomic<int> watched_rank{0};
std::atomic<MpiStage> watched_stage{MpiStage::starting};

// The blocking call being watched, if any (what == nullptr: none).
struct Watched {
  const std::string* what = nullptr;
  Clock::time_point since;
  double seconds = 0;
};
std::mutex watched_mutex;
Watched watched;  // guarded by watched_mutex

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
    double seconds = collective_timeout();
    {
      const std::lock_guard<std::mutex> lock(watched_mutex);
      if (watched.what) seconds = watched.seconds;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(0.1, seconds / 10)));
    std::string sentence;
    {
      const std::lock_guard<std::mutex> lock(watched_mutex);
      if (!watched.what) continue;
      const double waited = std::chrono::duration<double>(Clock::now() - watched.since).count();
      if (waited < watched.seconds) continue;
      sentence = "collective timeout (--collective-timeout " + seconds_text(collective_timeout()) + "): device " +
                 std::to_string(watched_rank.load()) + " waited " + seconds_text(waited) + " inside " + *watched.what;
    }
    mpi_fault_exit(sentence, 500);
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
  const std::lock_guard<std::mutex> lock(watched_mutex);
  watched = {&what, Clock::now(), seconds};
}

BlockingCall::~BlockingCall() {
  const std::lock_guard<std::mutex> lock(watched_mutex);
  watched.what = nullptr;
}

}  // namespace shardlab
