#include "collectives/mpi_world.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "collectives/exit_signals.hpp"
#include "collectives/stop_point.hpp"
#include "collectives/mpi_watchdog.hpp"
#include "collectives/watchdog.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"

namespace shardlab {

int mpi_tag_ub() {
  void* value = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &flag);
  return flag ? *static_cast<int*>(value) : 32767;
}

namespace {
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

int recv_int(int source, int tag, MPI_Comm comm) {
  int value = 0;
  MPI_Request r;
  mpi_check(MPI_Irecv(&value, 1, MPI_INT, source, tag, comm, &r), "MPI_Irecv");
  wait_yielding(&r, "MPI_Irecv", "for device " + std::to_string(source) + " to agree on the exit status");
  return value;
}
}  // namespace

void mpi_check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(ErrorKind::device, std::string(what) + " failed: " + text);
}

MpiProcess& MpiProcess::get() {
  static MpiProcess* process = new MpiProcess();  // never destroyed: leave() runs at exit
  return *process;
}

MpiProcess::MpiProcess() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  // Tensors of several MiB are allocated per collective call. glibc would map each one afresh and
  // unmap it on free, and every first touch of a fresh page is a fault (and, with UCX, a memory
  // event): at 16 MiB that costs more than moving the data. Keep freed memory for reuse instead.
  keep_freed_memory();
  if (!initialized) MPI_Init(nullptr, nullptr);
  // Failures come back as return codes and become Errors: no abort, no stack spam.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  launched_ = std::getenv("PMI_RANK") || std::getenv("PMIX_RANK") || std::getenv("PMI_FD");
  // Processes on this host: hydra says so in MPI_LOCALNRANKS; asking MPI (a split by shared
  // memory) is a collective that costs 0.27 s at 8 ranks on 2 cores, a quarter of a short run.
  int local_size = 0;
  if (const char* n = std::getenv("MPI_LOCALNRANKS")) local_size = std::atoi(n);
  if (local_size <= 0) {
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &local_size);
    MPI_Comm_free(&local);
  }
  crowded_ = local_size > static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Hosts emulated on one machine (make cluster: network namespaces) each hold one rank, so hydra
  // says 1, yet they share one machine's cores. Spinning there stalls each ring step: a rank that is
  // not running does not drain its socket, and the link idles (make cluster's 4 hosts show it);
  // SHARDLAB_CROWDED=1 makes them yield as crowded ranks do (=0: spin however many share).
  if (const char* c = std::getenv("SHARDLAB_CROWDED")) {
    if (std::string(c) != "0" && std::string(c) != "1") {
      if (rank_ == 0) std::fprintf(stderr, "error: SHARDLAB_CROWDED is '%s'; set it to 1 (ranks share cores) or 0\n", c);
      MPI_Finalize();
      std::_Exit(2);
    }
    crowded_ = c[0] == '1';
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &harness_);
  gone_.assign(size_, false);
  on_exit([](int status, void*) { MpiProcess::get().leave(status); }, nullptr);
  if (launched_) abort_on_signals();
  stop_point("start", rank_);
}

// SIGINT or SIGTERM under mpiexec: the handler hands the signal over a pipe to this thread, which
// ends the job with MPI_Abort(128 + signal), the one way of ending that hydra reports reliably
// (collectives/exit_signals.hpp). MPI_Abort prints a line of its own; one sentence is the rule,
// and an interrupted run needs none.
void MpiProcess::abort_on_signals() {
  int fds[2];
  if (::pipe(fds) != 0) return;  // the handler keeps exiting by itself
  std::thread([read_end = fds[0]] {
    unsigned char s = 0;
    for (ssize_t got; (got = ::read(read_end, &s, 1)) != 1;)
      if (got == 0 || errno != EINTR) {  // the pipe failed: the handler goes back to exiting by itself
        hand_signals_to(-1);
        return;
      }
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, 2);
    MPI_Abort(MPI_COMM_WORLD, 128 + s);
    ::_exit(128 + s);
  }).detach();
  hand_signals_to(fds[1]);
}

void MpiProcess::idle(long spin) const {
  if (spin < 64) return;
  if (crowded_ && spin > 1024) {
    const timespec pause{0, 50 * 1000};
    nanosleep(&pause, nullptr);
  } else {
    sched_yield();
  }
}

int MpiProcess::run_tag(int epoch, RunKind kind) const {
  static const int epochs = (mpi_tag_ub() - kRunTags) / kRunKinds;
  return kRunTags + (epoch % epochs) * kRunKinds + kind;
}

const std::vector<MPI_Comm>& MpiProcess::comms(const Mesh& mesh) {
  if (comms_key_ == mesh.text() && !comms_.empty()) return comms_;
  drop_comms();
  const int k = mesh.rank();
  comms_.assign(std::size_t{1} << k, MPI_COMM_NULL);
  comms_[0] = MPI_COMM_SELF;
  MPI_Group world;
  mpi_check(MPI_Comm_group(harness_, &world), "MPI_Comm_group");
  for (unsigned mask = 1; mask < comms_.size(); ++mask) {
    std::vector<std::string> in, out;
    for (int a = 0; a < k; ++a) (mask >> a & 1u ? in : out).push_back(mesh.names()[a]);
    // The members: the devices with this rank's coordinates off the group's axes, ranked by their
    // position along them. Only they take part (MPI_Comm_create_group; a split of the whole world
    // per mask cost twice as much at 8 ranks), and every rank makes its groups in mask order.
    std::vector<int> members(mesh.devices(), -1);
    for (int d = 0; d < mesh.devices(); ++d)
      if (mesh.index_along(d, out) == mesh.index_along(rank_, out)) members[mesh.index_along(d, in)] = d;
    members.erase(std::remove(members.begin(), members.end(), -1), members.end());
    MPI_Group group;
    if (const int rc = MPI_Group_incl(world, static_cast<int>(members.size()), members.data(), &group);
        rc != MPI_SUCCESS) {
      MPI_Group_free(&world);
      mpi_check(rc, "MPI_Group_incl");
    }
    const int rc = MPI_Comm_create_group(harness_, group, kTagGroups, &comms_[mask]);
    MPI_Group_free(&group);
    if (rc != MPI_SUCCESS) MPI_Group_free(&world);
    mpi_check(rc, "MPI_Comm_create_group");
  }
  MPI_Group_free(&world);
  comms_key_ = mesh.text();
  return comms_;
}

void MpiProcess::after_failure() {
  drop_comms();
  // Messages of the failed run that nobody will take stay queued; UCX (MPICH's ch4:ucx transport)
  // would list each at MPI_Finalize. The error was already reported in one sentence, so UCX is
  // told to keep to errors. Looked up at run time: other MPICH builds have no UCX.
  using SetValue = int (*)(const char*, const char*);
  if (auto set = reinterpret_cast<SetValue>(dlsym(RTLD_DEFAULT, "ucs_global_opts_set_value"))) set("LOG_LEVEL", "error");
}

void MpiProcess::drop_comms() {
  for (std::size_t i = 1; i < comms_.size(); ++i)
    if (comms_[i] != MPI_COMM_NULL) MPI_Comm_free(&comms_[i]);
  comms_.clear();
  comms_key_.clear();
}

int MpiProcess::agree(int status) {
  if (size_ == 1) return status;
  if (rank_ != 0) {
    mpi_check(MPI_Send(&status, 1, MPI_INT, 0, kTagAgree, harness_), "MPI_Send");
    const int v = recv_int(0, kTagAgreeReply, harness_);
    return v < 0 ? std::max(status, 2) : v;  // rank 0 is leaving without agreeing: it failed
  }
  int v = status;
  for (int r = 1; r < size_; ++r) {
    int s = -1;
    if (!gone_[r]) {
      s = recv_int(r, kTagAgree, harness_);
      if (s < 0) {  // r is leaving and waits for rank 0's goodbye
        gone_[r] = true;
        mpi_check(MPI_Send(&s, 1, MPI_INT, r, kTagAgreeReply, harness_), "MPI_Send");
      }
    }
    v = std::max(v, s < 0 ? 2 : s);
  }
  for (int r = 1; r < size_; ++r)
    if (!gone_[r]) mpi_check(MPI_Send(&v, 1, MPI_INT, r, kTagAgreeReply, harness_), "MPI_Send");
  return v;
}

bool MpiProcess::left_early(int r) {
  int flag = 0;
  MPI_Iprobe(r, kTagAgree, harness_, &flag, MPI_STATUS_IGNORE);
  if (!flag) return false;
  int s = recv_int(r, kTagAgree, harness_);
  const int gone = -1;
  if (s < 0) gone_[r] = true;
  // Once leaving, rank 0 answers goodbyes only when every rank has said one (leave), so that a
  // rank in MPI_Finalize knows every other has finished.
  if (s < 0 && left_) return true;
  MPI_Send(&gone, 1, MPI_INT, r, kTagAgreeReply, harness_);  // goodbye, or "rank 0 does not agree"
  return true;
}

void MpiProcess::leave(int status) {
  exit_status.store(status, std::memory_order_relaxed);
  if (left_) return;
  left_ = true;
  stop_point("finalize", rank_);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  // Every rank that has not said goodbye yet does so now; small sends are eager.
  const int gone = -1;
  if (rank_ != 0) {
    MPI_Send(&gone, 1, MPI_INT, 0, kTagAgree, harness_);
    recv_int(0, kTagAgreeReply, harness_);  // rank 0's goodbye (or its "left" answer to an agree)
  } else {
    std::vector<bool> answered = gone_;  // goodbyes answered before this (left_early during a run)
    for (int r = 1; r < size_; ++r) {
      const Deadline deadline;
      while (!gone_[r]) {
        MPI_Status st;
        int flag = 0;
        MPI_Iprobe(r, MPI_ANY_TAG, harness_, &flag, &st);
        if (!flag) {
          if (deadline.passed())
            mpi_harness_timeout(0, deadline.waited(), "at exit for device " + std::to_string(r) + " to finish");
          sched_yield();
          continue;
        }
        if (st.MPI_TAG == kTagAgree) {
          left_early(r);  // a status (r waits to agree: it learns rank 0 left) or r's goodbye
        } else if (st.MPI_TAG >= kRunTags && (st.MPI_TAG - kRunTags) % kRunKinds == enter) {
          // r waits to start a run that rank 0 will never start: tell it so.
          char none = 0;
          MPI_Recv(&none, 0, MPI_BYTE, r, st.MPI_TAG, harness_, MPI_STATUS_IGNORE);
          const std::string why = "rank 0 stopped before this run began";
          MPI_Send(why.data(), static_cast<int>(why.size()), MPI_BYTE, r, st.MPI_TAG + (go - enter), harness_);
        } else {
          int n = 0;  // anything else from a run that is over
          MPI_Get_count(&st, MPI_BYTE, &n);
          std::vector<char> junk(n);
          MPI_Recv(junk.data(), n, MPI_BYTE, r, st.MPI_TAG, harness_, MPI_STATUS_IGNORE);
        }
      }
    }
    for (int r = 1; r < size_; ++r)  // every rank has said goodbye: now answer them
      if (!answered[r]) MPI_Send(&gone, 1, MPI_INT, r, kTagAgreeReply, harness_);
  }
  // MPICH's finalize waits for the other ranks too: a rank stopped after its goodbye (SIGSTOP)
  // would hold this one here forever, and over UCX's TCP transport MPICH 4.0.2's finalize
  // sometimes never returns (one rank spins in uct_tcp_iface_progress, waiting to disconnect from
  // a rank that has stopped progressing). Every rank has said goodbye by now, so nothing is left
  // to decide: past kFinalizeSeconds the watchdog says so and ends the job with the program's own
  // status (finalize_hang below).
  stop_point("goodbye", rank_);
  std::fflush(nullptr);  // the run's output is out before a finalize that may end in an abort
  const BlockingCall guard(kFinalizing);
  hand_signals_to(-1);  // no MPI_Abort once finalizing: a signal now exits at once
  MPI_Finalize();
}
}  // namespace shardlab
