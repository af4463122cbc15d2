// The collective watchdog: how long a device may wait for other devices (in a collective, a
// point-to-point send or receive, or the MPI harness's own exchanges) before the run stops as a
// runtime fault: one sentence on stderr naming who has not arrived, exit status 3.
// The limit is process-wide: --collective-timeout SECONDS sets it (harness/cli/timeout_option.hpp),
// and so does every Session from its CommonOptions.
//   sim: a waiting device stops the run with Error(ErrorKind::fault) (collectives/sim.cpp).
//   mpi: a waiting rank prints its sentence, tells the other ranks (who print theirs), and ends
//        the job with MPI_Abort(MPI_COMM_WORLD, 3) (collectives/mpi_watchdog.cpp).
#pragma once
#include <chrono>
#include <string>

namespace shardlab {

constexpr double kDefaultCollectiveTimeout = 300;  // seconds

double collective_timeout();                  // seconds; kDefaultCollectiveTimeout unless set
void set_collective_timeout(double seconds);  // must be > 0; Error(parse) otherwise
// "2 s", "0.25 s", "300 s": a duration for the sentences.
std::string seconds_text(double seconds);

// The moment a wait that starts now gives up.
class Deadline {
 public:
  explicit Deadline(double seconds = collective_timeout());
  bool passed() const { return std::chrono::steady_clock::now() >= at_; }
  std::chrono::steady_clock::time_point at() const { return at_; }
  double waited() const;  // seconds since the wait began

 private:
  std::chrono::steady_clock::time_point start_, at_;
};

}  // namespace shardlab
