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
  // Every rank first, so that a rank missing from the start is named by all, not only by the
  // members of its groups (the others would wait in turn for those members, and name them).
  roll_call(harness_, everyone(), "to make the group communicators");
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
    std::vector<int> missing;  // the members not heard from yet
    for (std::size_t i = 0; i < requests.size(); ++i) {
      int done = 0;
      if (requests[i] != MPI_REQUEST_NULL) mpi_check(MPI_Test(&requests[i], &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (requests[i] != MPI_REQUEST_NULL) missing.push_back(from[i]);
    }
    if (missing.empty()) return;
    if (spin % 64 == 63 && deadline.passed())
      mpi_harness_timeout(rank_, deadline.waited(), "for " + mpi_devices(missing) + " " + what);
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

}  // namespace shardlab
