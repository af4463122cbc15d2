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
  // Tensors of several MiB are allocated per collective call. glibc would map each one afresh and
  // unmap it on free, and every first touch of a fresh page is a fault (and, with UCX, a memory
  // event): at 16 MiB that costs more than moving the data. Keep freed memory for reuse instead.
  keep_freed_memory();
  launched_ = std::getenv("PMI_RANK") || std::getenv("PMIX_RANK") || std::getenv("PMI_FD");
  const char* launcher_rank = std::getenv("PMI_RANK") ? std::getenv("PMI_RANK") : std::getenv("PMIX_RANK");
  start_mpi(launcher_rank ? std::atoi(launcher_rank) : 0);
  // Processes on this host: hydra says so in MPI_LOCALNRANKS; asking MPI (a split by shared
  // memory) is a collective that costs 0.27 s at 8 ranks on 2 cores, a quarter of a short run.
  int local_size = 0;
  if (const char* n = std::getenv("MPI_LOCALNRANKS")) local_size = std::atoi(n);
  if (local_size <= 0) {
    const std::string what = "MPI_Comm_split_type for " + mpi_waiting_for(others());
    const BlockingCall guard(what);
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
  gone_.assign(size_, false);
  on_exit([](int, void*) { MpiProcess::get().leave(); }, nullptr);
  if (launched_) abort_on_signals();
  stop_point("start", rank_);
}

// MPI_Init waits for every process of the job (a rank stopped before it holds the others there),
// and so does the harness communicator's MPI_Comm_dup: both under the watchdog. Who is missing
// cannot be asked before MPI is up, so MPI_Init's sentence names every other process; between the
// two, a roll call names a rank that has not come out of MPI_Init.
void MpiProcess::start_mpi(int launcher_rank) {
  mpi_watch_as(launcher_rank, MpiStage::starting);
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    stop_point("init", launcher_rank);
    const char* n = std::getenv("PMI_SIZE");
    std::vector<int> job;  // the job's other processes, as mpiexec numbers them
    for (int r = 0, size = n ? std::atoi(n) : 1; r < size; ++r)
      if (r != launcher_rank) job.push_back(r);
    const std::string what = "MPI_Init for " + mpi_waiting_for(job);
    const BlockingCall guard(what);
    MPI_Init(nullptr, nullptr);
  }
  // Failures come back as return codes and become Errors: no abort, no stack spam.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  mpi_watch_as(rank_, MpiStage::running);
  roll_call(MPI_COMM_WORLD, everyone(), "to start");
  const std::string what = "MPI_Comm_dup for " + mpi_waiting_for(others());
  const BlockingCall guard(what);
  MPI_Comm_dup(MPI_COMM_WORLD, &harness_);
}

std::vector<int> MpiProcess::everyone() const {
  std::vector<int> ids(size_);
  for (int r = 0; r < size_; ++r) ids[r] = r;
  return ids;
}

std::vector<int> MpiProcess::others() const {
  std::vector<int> ids;
  for (int r = 0; r < size_; ++r)
    if (r != rank_) ids.push_back(r);
  return ids;
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
  stop_point("groups", rank_);
  comms_.assign(std::size_t{1} << mesh.rank(), MPI_COMM_NULL);
  comms_[0] = MPI_COMM_SELF;
  MPI_Group world;
  mpi_check(MPI_Comm_group(harness_, &world), "MPI_Comm_group");
  try {
    for (unsigned mask = 1; mask < comms_.size(); ++mask) comms_[mask] = make_comm(mesh, mask, world);
  } catch (...) {
    MPI_Group_free(&world);
    throw;
  }
  MPI_Group_free(&world);
  comms_key_ = mesh.text();
  return comms_;
}

MPI_Comm MpiProcess::make_comm(const Mesh& mesh, unsigned mask, MPI_Group world) {
  std::vector<std::string> in, out;
  for (int a = 0; a < mesh.rank(); ++a) (mask >> a & 1u ? in : out).push_back(mesh.names()[a]);
  // The members: the devices with this rank's coordinates off the group's axes, ranked by their
  // position along them. Only they take part (MPI_Comm_create_group; a split of the whole world
  // per mask cost twice as much at 8 ranks), and every rank makes its groups in mask order.
  std::vector<int> members(mesh.devices(), -1);
  for (int d = 0; d < mesh.devices(); ++d)
    if (mesh.index_along(d, out) == mesh.index_along(rank_, out)) members[mesh.index_along(d, in)] = d;
  members.erase(std::remove(members.begin(), members.end(), -1), members.end());
  std::string axes;
  for (const auto& a : in) axes += (axes.empty() ? "" : ",") + a;
  roll_call(harness_, members, "to make the communicator over " + axes);
  MPI_Group group;
  mpi_check(MPI_Group_incl(world, static_cast<int>(members.size()), members.data(), &group), "MPI_Group_incl");
  std::vector<int> waiting_for = members;
  waiting_for.erase(std::remove(waiting_for.begin(), waiting_for.end(), rank_), waiting_for.end());
  const std::string what = "MPI_Comm_create_group over " + axes + " for " + mpi_waiting_for(waiting_for);
  MPI_Comm comm = MPI_COMM_NULL;
  int rc = MPI_SUCCESS;
  {
    const BlockingCall guard(what);
    rc = MPI_Comm_create_group(harness_, group, kTagGroups, &comm);
  }
  MPI_Group_free(&group);
  mpi_check(rc, "MPI_Comm_create_group");
  return comm;
}

void MpiProcess::roll_call(MPI_Comm comm, const std::vector<int>& members, const std::string& what) {
  std::vector<MPI_Request> requests;
  requests.reserve(members.size());
  std::vector<int> from;
  static char none = 0;
  for (int r : members) {
    if (r == rank_) continue;
    requests.emplace_back();
    mpi_check(MPI_Irecv(&none, 0, MPI_BYTE, r, kTagRollCall, comm, &requests.back()), "MPI_Irecv");
    from.push_back(r);
  }
  for (int r : from) mpi_check(MPI_Send(&none, 0, MPI_BYTE, r, kTagRollCall, comm), "MPI_Send");
  const Deadline deadline;
  for (long spin = 0;; ++spin) {
    std::string missing;  // the members not heard from yet
    for (std::size_t i = 0; i < requests.size(); ++i) {
      int done = 0;
      if (requests[i] != MPI_REQUEST_NULL) mpi_check(MPI_Test(&requests[i], &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (requests[i] != MPI_REQUEST_NULL) missing += (missing.empty() ? "" : ", ") + std::to_string(from[i]);
    }
    if (missing.empty()) return;
    if (spin % 64 == 63 && deadline.passed())
      mpi_harness_timeout(rank_, deadline.waited(),
                          "for device" + std::string(missing.find(',') != std::string::npos ? "s " : " ") + missing +
                              " " + what);
    idle(spin);
  }
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
    return v == kGoodbye ? std::max(status, 2) : v;  // rank 0 is leaving without agreeing: it failed
  }
  int v = status;
  for (int r = 1; r < size_; ++r) {
    int s = kGoodbye;
    if (!gone_[r]) {
      s = recv_int(r, kTagAgree, harness_);
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
  const int s = recv_int(r, kTagAgree, harness_);
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
  // Over UCX's TCP transport, MPI_Finalize closes every endpoint, and closing one that never
  // carried a message needs the peer to answer its connection first. A peer already past its own
  // closes waits in the launcher's barrier and no longer answers, so the two wait for each other
  // forever: on 4 hosts ranks that never exchanged a message (the diagonal of a 2x2 mesh) are such
  // pairs, which 2 hosts never have. So every pair exchanges a message first, with a deadline: then
  // every endpoint is connected, and a rank that is missing is named.
  roll_call(harness_, everyone(), "to finish together");
  finalize();
}

void MpiProcess::say_goodbye() {
  const int goodbye = kGoodbye;
  MPI_Send(&goodbye, 1, MPI_INT, 0, kTagAgree, harness_);
  recv_int(0, kTagAgreeReply, harness_);  // rank 0's answer (or its "left" answer to an agree)
}

void MpiProcess::collect_goodbyes() {
  const std::vector<bool> answered = gone_;  // goodbyes answered during a run (left_early)
  for (int r = 1; r < size_; ++r) await_goodbye(r);
  const int goodbye = kGoodbye;
  for (int r = 1; r < size_; ++r)  // every rank has said goodbye: now answer them
    if (!answered[r]) MPI_Send(&goodbye, 1, MPI_INT, r, kTagAgreeReply, harness_);
}

void MpiProcess::await_goodbye(int r) {
  const Deadline deadline;
  while (!gone_[r]) {
    MPI_Status message;
    int flag = 0;
    MPI_Iprobe(r, MPI_ANY_TAG, harness_, &flag, &message);
    if (flag) {
      answer_while_leaving(r, message);
      continue;
    }
    if (deadline.passed())
      mpi_harness_timeout(0, deadline.waited(), "at exit for device " + std::to_string(r) + " to finish");
    sched_yield();
  }
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

// MPICH's finalize waits for the other ranks too: a rank stopped after its goodbye would hold this
// one here forever, and over UCX's TCP transport MPICH 4.0.2's finalize sometimes never returns
// (one rank spins in uct_tcp_iface_progress, waiting to disconnect from a rank that has stopped
// progressing). So the watchdog ends a finalize past min(--collective-timeout, kFinalizeSeconds)
// as a runtime fault, exit 3, naming the others.
void MpiProcess::finalize() {
  stop_point("mpi_finalize", rank_);
  std::fflush(nullptr);  // the run's output is out before a finalize that may end in a fault
  hand_signals_to(-1);   // no MPI_Abort once finalizing: a signal now exits at once
  mpi_watch_as(rank_, MpiStage::finishing);
  const double limit = std::min(collective_timeout(), kFinalizeSeconds);
  const std::string what = "MPI_Finalize (given " + seconds_text(limit) + ") for " + mpi_waiting_for(others());
  const BlockingCall guard(what, limit);
  MPI_Finalize();
}

}  // namespace shardlab
