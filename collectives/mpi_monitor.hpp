// One run's waits on the mpi backend (part of the MPI side: mpi_world.hpp).
//   MpiRun      one per Runtime::run. Its wait() never hangs: it polls the requests together
//               with the run's notes. An abort note (another rank failed) stops the wait with
//               MpiAborted. A rank blocked for a while tells rank 0; rank 0 declares a deadlock
//               (collectives that do not match, or a device that finished without taking part)
//               once every live rank has been blocked, with nothing changing, for a while.
//
// Collective timeout (collectives/watchdog.hpp): a wait that lasts longer is a runtime fault. The
// rank prints one sentence (what it waited in, for whom), tells the others, who print theirs, and
// ends the job with MPI_Abort(MPI_COMM_WORLD, 3) (mpi_watchdog.hpp). The harness's own waits
// (results, verdicts, exit status) have the same limit.
#pragma once
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/mpi_world.hpp"

namespace shardlab {

// Thrown in a device's program when another rank failed first; that rank's error is reported.
struct MpiAborted {};

class MpiRun {
 public:
  MpiRun(MpiProcess& process, int epoch);
  int epoch() const { return epoch_; }
  int group_tag(int channel) const;  // payload tags on group communicators

  // Polls until every request completes. `peer` (a device) and `activity` describe the wait for
  // deadlock reports. Throws MpiAborted when another rank failed, Error(mismatch) on rank 0 when it
  // finds a deadlock, Error(mismatch) when a message has the wrong size. On a throw the requests
  // are left to the caller (cancel_requests).
  void wait(int count, MPI_Request* requests, MPI_Status* statuses, int peer, const std::string& activity);
  // Cancels receives (waiting briefly for them) and frees sends; used when a wait threw.
  static void cancel_requests(int count, MPI_Request* requests);

  void abort_others();  // this rank failed: every other rank stops waiting
  void finished();      // this rank's program is over (rank 0's monitor counts it as not live)
  // Rank 0 in the collection phase: handle notes; returns a deadlock message when one is found.
  std::string monitor();
  // Notes this rank sent to each rank. After the verdict every rank takes the notes still meant
  // for it (`expected` in all), so none is left unmatched.
  const std::vector<std::uint64_t>& notes_sent() const { return sent_; }
  void drain_notes(std::uint64_t expected);

 private:
  using Clock = std::chrono::steady_clock;
  enum Note { abort_note = 1, stuck_note = 2, unstuck_note = 3, finished_note = 4, timeout_note = 5 };
  enum class State { running, stuck, finished };
  struct RankState {
    State state = State::running;
    int peer = -1;
    std::string activity;
  };
  void send_note(int to, Note note, int peer, const std::string& activity);
  void poll_notes();                  // may throw MpiAborted
  void set_state(int rank, State s, int peer, const std::string& activity);  // rank 0's view
  std::string find_deadlock() const;  // rank 0: message, or empty
  // This rank waited past the collective timeout: tells the others, prints, aborts the job.
  [[noreturn]] void time_out(int peer, const std::string& activity, double waited);
  // Another rank (`from`) timed out: this rank says what it was doing, then aborts the job.
  [[noreturn]] void stopped_by(int from);

  MpiProcess& process_;
  int epoch_;
  bool aborted_ = false, in_program_ = true;
  std::vector<RankState> ranks_;  // rank 0 only
  std::vector<std::uint64_t> sent_;
  std::uint64_t received_ = 0;
  Clock::time_point last_change_;
  int waiting_for_ = -1;       // the device this rank waits for in wait(), or -1
  std::string last_activity_;  // what this rank's last wait was in
};

}  // namespace shardlab
