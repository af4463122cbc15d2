#include "collectives/mpi_monitor.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "collectives/mpi_watchdog.hpp"
#include "collectives/watchdog.hpp"
#include "core/error.hpp"

namespace shardlab {

namespace {
using namespace std::chrono_literals;
// A rank blocked this long tells rank 0; rank 0 declares a deadlock when every live rank is blocked
// and nothing has changed for kConfirm. Oversubscribed ranks (8 on 2 cores) take 10-50 ms a step,
// and a message in flight is delivered within milliseconds while everyone polls, so a live run
// never looks like this.
constexpr auto kStuckAfter = 250ms;
constexpr auto kConfirm = 750ms;
}  // namespace

MpiRun::MpiRun(MpiProcess& process, int epoch)
    : process_(process), epoch_(epoch), sent_(process.size(), 0), last_change_(Clock::now()) {
  if (process_.rank() == 0) ranks_.resize(process_.size());
}

int MpiRun::group_tag(int channel) const {
  static const int epochs = mpi_tag_ub() / 4 - 1;
  return (epoch_ % epochs) * 4 + channel;
}

void MpiRun::wait(int count, MPI_Request* requests, MPI_Status* statuses, int peer, const std::string& activity) {
  const auto start = Clock::now();
  const Deadline deadline;
  waiting_for_ = peer;
  last_activity_ = activity.empty() ? "an exchange before its first collective" : activity;
  bool reported = false;
  for (long spin = 0;; ++spin) {
    int done = 0;
    if (MPI_Testall(count, requests, &done, statuses) != MPI_SUCCESS)
      throw Error(ErrorKind::mismatch, "collectives do not match: device " + std::to_string(process_.rank()) +
                                           " in " + activity + " got a message of the wrong size from device " +
                                           std::to_string(peer));
    if (done) break;
    if (spin % 16 == 15) {
      poll_notes();
      if (deadline.passed()) time_out(peer, last_activity_, deadline.waited());
      if (!reported && Clock::now() - start > kStuckAfter) {
        reported = true;
        if (process_.rank() == 0) set_state(0, State::stuck, peer, activity);
        else send_note(0, stuck_note, peer, activity);
      }
      if (reported && process_.rank() == 0 && !aborted_) {
        const std::string deadlock = find_deadlock();
        if (!deadlock.empty()) {
          abort_others();
          throw Error(ErrorKind::mismatch, deadlock);
        }
      }
    }
    // Oversubscribed ranks let the peer they wait for run; with a core each they spin, as MPICH does.
    if (process_.crowded()) process_.idle(spin);
  }
  waiting_for_ = -1;
  if (reported) {
    if (process_.rank() == 0) set_state(0, State::running, -1, "");
    else send_note(0, unstuck_note, -1, "");
  }
}

void MpiRun::time_out(int peer, const std::string& activity, double waited) {
  // Every other rank hears of it (those waiting print their own sentence); a send to a stopped or
  // dead rank must not block, so the notes go out without waiting for them.
  static const int head[2] = {static_cast<int>(timeout_note), -1};
  for (int r = 0; r < process_.size(); ++r) {
    if (r == process_.rank()) continue;
    MPI_Request req = MPI_REQUEST_NULL;
    if (MPI_Isend(head, 2, MPI_INT, r, process_.run_tag(epoch_, MpiProcess::note), process_.harness(), &req) ==
        MPI_SUCCESS)
      MPI_Request_free(&req);
  }
  std::string who = "for device " + std::to_string(peer) + ", which has not answered";
  if (!ranks_.empty()) {  // rank 0 knows which ranks are waiting too: the others have not arrived
    std::string ids;
    int count = 0;
    for (std::size_t r = 1; r < ranks_.size(); ++r)
      if (ranks_[r].state == State::running) ids += (count++ ? ", " : "") + std::to_string(r);
    if (count > 0) who = "for device " + std::to_string(peer) + "; " + (count == 1 ? "device " : "devices ") + ids +
                         (count == 1 ? " has" : " have") + " not arrived in any collective";
  }
  mpi_fault_exit("collective timeout (--collective-timeout " + seconds_text(collective_timeout()) + "): device " +
                     std::to_string(process_.rank()) + " waited " + seconds_text(waited) + " in " + activity + " " +
                     who,
                 500);
}

void MpiRun::stopped_by(int from) {
  const std::string doing =
      !in_program_ ? "had finished its program"
      : waiting_for_ >= 0 ? "was waiting in " + last_activity_ + " for device " + std::to_string(waiting_for_)
                          : "was running its program";
  mpi_fault_exit("device " + std::to_string(process_.rank()) + " " + doing + " when device " + std::to_string(from) +
                     " stopped the run after waiting past the collective timeout (--collective-timeout " +
                     seconds_text(collective_timeout()) + ")",
                 200);
}

void MpiRun::cancel_requests(int count, MPI_Request* requests) {
  for (int i = 0; i < count; ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&requests[i]);
    // A cancelled receive completes at once; a send whose peer never takes it does not, so it is
    // freed after a short wait (its buffer is not read again: the peer has left this run).
    const auto start = Clock::now();
    int done = 0;
    while (!done && Clock::now() - start < 200ms) {
      MPI_Test(&requests[i], &done, MPI_STATUS_IGNORE);
      if (!done) sched_yield();
    }
    if (!done) MPI_Request_free(&requests[i]);
  }
}

void MpiRun::send_note(int to, Note note, int peer, const std::string& activity) {
  std::vector<char> buf(2 * sizeof(int) + activity.size());
  const int head[2] = {static_cast<int>(note), peer};
  std::memcpy(buf.data(), head, sizeof head);
  std::memcpy(buf.data() + sizeof head, activity.data(), activity.size());
  mpi_check(MPI_Send(buf.data(), static_cast<int>(buf.size()), MPI_CHAR, to,
                     process_.run_tag(epoch_, MpiProcess::note), process_.harness()),
            "MPI_Send");
  ++sent_[to];
}

void MpiRun::poll_notes() {
  const int tag = process_.run_tag(epoch_, MpiProcess::note);
  for (;;) {
    int flag = 0;
    MPI_Status st;
    mpi_check(MPI_Iprobe(MPI_ANY_SOURCE, tag, process_.harness(), &flag, &st), "MPI_Iprobe");
    if (!flag) return;
    int n = 0;
    MPI_Get_count(&st, MPI_CHAR, &n);
    std::vector<char> buf(std::max<int>(n, 2 * sizeof(int)));
    mpi_check(MPI_Recv(buf.data(), n, MPI_CHAR, st.MPI_SOURCE, tag, process_.harness(), MPI_STATUS_IGNORE),
              "MPI_Recv");
    ++received_;
    int head[2];
    std::memcpy(head, buf.data(), sizeof head);
    const std::string activity(buf.data() + sizeof head, buf.data() + std::max<int>(n, sizeof head));
    switch (static_cast<Note>(head[0])) {
      case abort_note:
        if (in_program_) {
          aborted_ = true;
          throw MpiAborted{};
        }
        break;
      case stuck_note: set_state(st.MPI_SOURCE, State::stuck, head[1], activity); break;
      case unstuck_note: set_state(st.MPI_SOURCE, State::running, -1, ""); break;
      case finished_note: set_state(st.MPI_SOURCE, State::finished, -1, ""); break;
      case timeout_note: stopped_by(st.MPI_SOURCE);
    }
  }
}

void MpiRun::abort_others() {
  if (aborted_) return;
  aborted_ = true;
  for (int r = 0; r < process_.size(); ++r)
    if (r != process_.rank()) send_note(r, abort_note, -1, "");
}

void MpiRun::finished() {
  in_program_ = false;
  if (process_.rank() == 0) set_state(0, State::finished, -1, "");
  else send_note(0, finished_note, -1, "");
}

void MpiRun::drain_notes(std::uint64_t expected) {
  in_program_ = false;
  while (received_ < expected) {
    poll_notes();
    if (received_ < expected) sched_yield();
  }
}

std::string MpiRun::monitor() {
  poll_notes();
  if (aborted_) return "";
  std::string deadlock = find_deadlock();
  if (!deadlock.empty()) abort_others();
  return deadlock;
}

void MpiRun::set_state(int rank, State s, int peer, const std::string& activity) {
  if (ranks_.empty()) return;
  ranks_[rank] = {s, peer, activity};
  last_change_ = Clock::now();
}

std::string MpiRun::find_deadlock() const {
  bool any_stuck = false;
  for (const auto& r : ranks_) {
    if (r.state == State::running) return "";
    any_stuck = any_stuck || r.state == State::stuck;
  }
  if (!any_stuck || Clock::now() - last_change_ < kConfirm) return "";
  for (std::size_t d = 0; d < ranks_.size(); ++d) {
    const auto& r = ranks_[d];
    if (r.state == State::stuck && r.peer >= 0 && ranks_[r.peer].state == State::finished)
      return "device " + std::to_string(d) + " waits in " + r.activity + " for device " + std::to_string(r.peer) +
             ", which finished its program without taking part";
  }
  // Over a slow link (hosts at 200 Mbit/s: a 16 MiB ring step takes 0.7 s) every device waits, each
  // for a peer waiting in the very same collective: that is a message in flight, not a mismatch.
  // If it never arrives (a link down), the collective timeout ends the run.
  bool in_flight = true;
  for (const auto& r : ranks_)
    if (r.state == State::stuck &&
        (r.peer < 0 || ranks_[r.peer].state != State::stuck || ranks_[r.peer].activity != r.activity))
      in_flight = false;
  if (in_flight) return "";
  std::string report;
  for (std::size_t d = 0; d < ranks_.size(); ++d) {
    if (ranks_[d].state != State::stuck) continue;
    if (!report.empty()) report += "; ";
    report += "device " + std::to_string(d) + " in " + ranks_[d].activity + " waits for device " +
              std::to_string(ranks_[d].peer);
  }
  return "collectives do not match, every device is stuck: " + report;
}

}  // namespace shardlab
