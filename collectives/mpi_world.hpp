// The MPI side of the mpi backend that is not payload (payload: mpi_transport.hpp).
//
//   MpiProcess  one per process: MPI_Init (errors return, never abort), the harness communicator
//               (run control, results, exit-status agreement; never in the ledger), and the
//               per-group communicators of a mesh: one per set of mesh axes, all made with
//               MPI_Comm_create_group when a run starts, while every rank is known to be there.
//   MpiRun      one per Runtime::run. Its wait() never hangs: it polls the requests together
//               with the run's notes. An abort note (another rank failed) stops the wait with
//               MpiAborted. A rank blocked for a while tells rank 0; rank 0 declares a deadlock
//               (collectives that do not match, or a device that finished without taking part)
//               once every live rank has been blocked, with nothing changing, for a while.
//
// Collective timeout (collectives/watchdog.hpp): a wait that lasts longer is a runtime fault. The
// rank prints one sentence (what it waited in, for whom), tells the others, who print theirs, and
// ends the job with MPI_Abort(MPI_COMM_WORLD, 3): mpiexec exits 3 and kills every rank, a stopped
// one too. The harness's own waits (results, verdicts, exit status) have the same limit.
//
// Tags on the harness communicator carry the run's epoch, so notes of a failed run never match a
// later one; after a failed run every group communicator is dropped and made anew.
#pragma once
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/mesh.hpp"

namespace shardlab {

// Thrown in a device's program when another rank failed first; that rank's error is reported.
struct MpiAborted {};

// Throws Error(device) naming `what` when an MPI call did not return MPI_SUCCESS.
void mpi_check(int rc, const char* what);

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

class MpiProcess {
 public:
  static MpiProcess& get();  // MPI_Init on first use
  int rank() const { return rank_; }
  int size() const { return size_; }
  bool launched() const { return launched_; }  // started by mpiexec (not a singleton)
  // More ranks on this host than cores: waits yield the core instead of spinning on it.
  bool crowded() const { return crowded_; }
  // Between polls of a wait, the spin-th: nothing at first, then a yield; with more ranks than
  // cores, a long wait sleeps 50 us a poll, so the ranks with work get the cores (a yield alone
  // hands the core to another waiting rank as often as to one with work).
  void idle(long spin) const;
  MPI_Comm harness() const { return harness_; }

  // comms(mesh)[mask]: this rank's communicator over the mesh axes whose bits are set in mask,
  // ranked row-major over those axes in mesh order. Collective over all ranks when not cached.
  const std::vector<MPI_Comm>& comms(const Mesh& mesh);
  // After a failed run: pending operations and messages may linger on the old communicators, so
  // they are dropped (the next run makes new ones) and UCX is asked not to list them at exit.
  void after_failure();
  int next_epoch() { return ++epoch_; }

  int agree(int status);  // largest status over ranks; a rank that already left counts as 2
  // At exit: a last handshake with rank 0 (which answers whoever still waits to agree or to start
  // a run with "rank 0 left"), so no message is left unmatched, then MPI_Finalize. `status`: what
  // the program exits with (on_exit), kept if MPI_Finalize hangs after the handshake.
  void leave(int status = 0);
  // Rank 0, before a run: true when rank r has left (or is not where rank 0 is); consumes its note.
  bool left_early(int r);

  // Harness tags. Run tags: kRunTags + epoch * kRunKinds + kind.
  static constexpr int kTagAgree = 1, kTagAgreeReply = 2, kTagGroups = 3, kRunTags = 16;
  enum RunKind { note = 0, result = 1, verdict = 2, enter = 3, go = 4, kRunKinds = 5 };
  int run_tag(int epoch, RunKind kind) const;

 private:
  void abort_on_signals();  // under mpiexec: SIGINT/SIGTERM end the job with MPI_Abort(128 + signal)
  MpiProcess();
  int rank_ = 0, size_ = 1;
  bool launched_ = false, left_ = false, crowded_ = false;
  MPI_Comm harness_ = MPI_COMM_NULL;
  std::string comms_key_;
  std::vector<MPI_Comm> comms_;
  std::vector<bool> gone_;  // rank 0: ranks that left (they no longer agree)
  int epoch_ = 0;
  void drop_comms();
};

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
