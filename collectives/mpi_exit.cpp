// The MPI process's end (part of MpiProcess, collectives/mpi_world.hpp): agreeing on the exit
// status, the exit handshake (every rank's goodbye, answered by rank 0 once all have said one), a
// last roll call, and MPI_Finalize under the watchdog.
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "collectives/exit_signals.hpp"
#include "collectives/mpi_ucx_close.hpp"
#include "collectives/mpi_watchdog.hpp"
#include "collectives/mpi_world.hpp"
#include "collectives/stop_point.hpp"
#include "collectives/watchdog.hpp"

namespace shardlab {

namespace {
constexpr double kFinalizeSeconds = 10;  // a finalize after every goodbye takes well under 1 s

// Completes one request while letting other ranks on the same core run; `why` describes the wait
// for the timeout's sentence.
void wait_yielding(MPI_Request* request, const char* what, const std::string& why) {
  const Deadline deadline;
  for (int spin = 0;; ++spin) {
    int done = 0;
    mpi_check(MPI_Test(request, &done, MPI_STATUS_IGNORE), what);
    if (done) return;
    if (spin % 64 == 63 && deadline.passed()) {
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      mpi_harness_timeout(rank, deadline.waited(), why);
    }
    if (spin > 64) sched_yield();
  }
}

// Receives one int from `source`; `why` (after "for device N") says what for.
int recv_int(int source, int tag, MPI_Comm comm, const char* why) {
  int value = 0;
  MPI_Request r;
  mpi_check(MPI_Irecv(&value, 1, MPI_INT, source, tag, comm, &r), "MPI_Irecv");
  wait_yielding(&r, "MPI_Irecv", "for device " + std::to_string(source) + " " + why);
  return value;
}

const char* const kToAgree = "to agree on the exit status";
}  // namespace

int MpiProcess::agree(int status) {
  if (size_ == 1) return status;
  if (rank_ != 0) {
    mpi_check(MPI_Send(&status, 1, MPI_INT, 0, kTagAgree, harness_), "MPI_Send");
    const int v = recv_int(0, kTagAgreeReply, harness_, kToAgree);
    return v == kGoodbye ? std::max(status, 2) : v;  // rank 0 is leaving without agreeing: it failed
  }
  int v = status;
  for (int r = 1; r < size_; ++r) {
    int s = kGoodbye;
    if (!gone_[r]) {
      s = recv_int(r, kTagAgree, harness_, kToAgree);
      if (s == kGoodbye) {  // r is leaving and waits for rank 0's answer
        gone_[r] = true;
        mpi_check(MPI_Send(&s, 1, MPI_INT, r, kTagAgreeReply, harness_), "MPI_Send");
      }
    }
    v = std::max(v, s == kGoodbye ? 2 : s);
  }
  for (int r = 1; r < size_; ++r)
    if (!gone_[r]) mpi_check(MPI_Send(&v, 1, MPI_INT, r, kTagAgreeReply, harness_), "MPI_Send");
  return v;
}

bool MpiProcess::left_early(int r) {
  int flag = 0;
  MPI_Iprobe(r, kTagAgree, harness_, &flag, MPI_STATUS_IGNORE);
  if (!flag) return false;
  const int s = recv_int(r, kTagAgree, harness_, kToAgree);
  if (s == kGoodbye) gone_[r] = true;
  // Once leaving, rank 0 answers goodbyes only when every rank has said one (collect_goodbyes), so
  // that a rank in MPI_Finalize knows every other has finished.
  if (s == kGoodbye && left_) return true;
  const int goodbye = kGoodbye;  // the answer to a goodbye, or "rank 0 does not agree"
  MPI_Send(&goodbye, 1, MPI_INT, r, kTagAgreeReply, harness_);
  return true;
}

void MpiProcess::leave() {
  if (left_) return;
  left_ = true;
  stop_point("finalize", rank_);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (rank_ != 0) say_goodbye();
  else collect_goodbyes();
  stop_point("goodbye", rank_);
  // Every pair exchanges a message, with a deadline: a rank that is missing is named here, and
  // once it returns, every rank has received all that was sent to it, so MPI_Finalize can close
  // the endpoints without flushing them (collectives/mpi_ucx_close.cpp).
  roll_call(harness_, everyone(), "to finish together");
  finalize();
}

void MpiProcess::say_goodbye() {
  const int goodbye = kGoodbye;
  MPI_Send(&goodbye, 1, MPI_INT, 0, kTagAgree, harness_);
  // Rank 0's answer (or its "left" answer to an agree).
  recv_int(0, kTagAgreeReply, harness_, "to answer its goodbye");
}

void MpiProcess::collect_goodbyes() {
  const std::vector<bool> answered = gone_;  // goodbyes answered during a run (left_early)
  const Deadline deadline;
  for (long spin = 0;; ++spin) {
    std::vector<int> missing;  // the ranks that have not said goodbye yet
    for (int r = 1; r < size_; ++r) {
      MPI_Status message;
      int flag = 0;
      if (!gone_[r]) MPI_Iprobe(r, MPI_ANY_TAG, harness_, &flag, &message);
      if (flag) answer_while_leaving(r, message);
      if (!gone_[r]) missing.push_back(r);
    }
    if (missing.empty()) break;
    if (spin % 64 == 63 && deadline.passed())
      mpi_harness_timeout(0, deadline.waited(), "at exit for " + mpi_devices(missing) + " to finish");
    idle(spin);
  }
  const int goodbye = kGoodbye;
  for (int r = 1; r < size_; ++r)  // every rank has said goodbye: now answer them
    if (!answered[r]) MPI_Send(&goodbye, 1, MPI_INT, r, kTagAgreeReply, harness_);
}

void MpiProcess::answer_while_leaving(int r, const MPI_Status& message) {
  const int tag = message.MPI_TAG;
  if (tag == kTagAgree) {  // r's goodbye, or a status to agree on (r learns that rank 0 left)
    left_early(r);
  } else if (tag >= kRunTags && (tag - kRunTags) % kRunKinds == enter) {
    // r waits to start a run that rank 0 will never start: tell it so, on that run's go tag.
    char none = 0;
    MPI_Recv(&none, 0, MPI_BYTE, r, tag, harness_, MPI_STATUS_IGNORE);
    const int go_tag = tag - enter + go;
    const std::string why = "rank 0 stopped before this run began";
    MPI_Send(why.data(), static_cast<int>(why.size()), MPI_BYTE, r, go_tag, harness_);
  } else {  // anything else is from a run that is over
    int n = 0;
    MPI_Get_count(&message, MPI_BYTE, &n);
    std::vector<char> junk(n);
    MPI_Recv(junk.data(), n, MPI_BYTE, r, tag, harness_, MPI_STATUS_IGNORE);
  }
}

// MPICH's finalize waits for the other ranks too: a rank stopped after the last roll call would
// hold this one here forever. So the watchdog ends a finalize past min(--collective-timeout,
// kFinalizeSeconds) as a runtime fault, exit 3, naming the others.
void MpiProcess::finalize() {
  stop_point("mpi_finalize", rank_);
  std::fflush(nullptr);  // the run's output is out before a finalize that may end in a fault
  hand_signals_to(-1);   // no MPI_Abort once finalizing: a signal now exits at once
  mpi_watch_as(rank_, MpiStage::finishing);
  const double limit = std::min(collective_timeout(), kFinalizeSeconds);
  const std::string what = "MPI_Finalize (given " + seconds_text(limit) + ") for " + mpi_waiting_for(others());
  const BlockingCall guard(what, limit);
  close_endpoints_without_flush();  // every rank has had everything (leave's roll call)
  MPI_Finalize();
}

}  // namespace shardlab
