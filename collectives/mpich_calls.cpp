// MPICH's own collectives for shardlab bench collectives (collectives/mpi.hpp: MpichCollectives).
// Part of the mpi backend's module (collectives/mpi_module.hpp).
#include <climits>
#include <string>
#include <vector>

#include "collectives/mpi_module.hpp"
#include "collectives/mpi_transport.hpp"
#include "collectives/mpi_watchdog.hpp"
#include "collectives/mpi_world.hpp"
#include "core/error.hpp"

namespace shardlab::mpi_module {

namespace {

// MPICH's own collectives, called directly on a communicator of the group (its rank = the
// member's position in the group, so inputs and expected values are ours) with buffers the caller
// preallocated: native_us is the MPI_* call alone. shardlab's --collectives native path
// (collectives/ring.cpp) adds a signature exchange, an MPI_Ibarrier and staging copies per call;
// none of that is timed here. A rank enters MPICH only after the untimed meeting (bench.cpp: meet), so a
// failure elsewhere stops the run in that meeting instead of leaving ranks inside MPICH.
class Mpich : public mpi::MpichCollectives {
 public:
  explicit Mpich(const Group& g) : n_(g.size()) {
    std::vector<int> others;  // for the watchdog's sentences
    for (int p = 0; p < g.size(); ++p)
      if (p != g.me) others.push_back(g.members[p]);
    for (const char* name : {"MPI_Allreduce", "MPI_Allgather", "MPI_Reduce_scatter_block", "MPI_Alltoall"})
      what_.push_back(std::string("MPICH's ") + name + " for " + mpi_waiting_for(others));
    // Every rank of the world takes part in the split, so it waits for them all.
    std::vector<int> world;
    for (int r = 0, n = MpiProcess::get().size(); r < n; ++r)
      if (r != MpiProcess::get().rank()) world.push_back(r);
    const std::string splitting = "MPI_Comm_split for " + mpi_waiting_for(world);
    const BlockingCall guard(splitting);
    check(MPI_Comm_split(MPI_COMM_WORLD, g.members[0], g.me, &comm_), "MPI_Comm_split");
  }
  ~Mpich() override {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  Mpich(const Mpich&) = delete;
  Mpich& operator=(const Mpich&) = delete;

  void call(const std::string& op, DType t, const void* in, std::size_t count, void* out) const override {
    const std::size_t each = count / n_;
    if (count > static_cast<std::size_t>(INT_MAX))
      throw Error(ErrorKind::unsupported, op + " of " + std::to_string(count) +
                                              " elements is more than one MPI call can carry here (int counts)");
    const int c = static_cast<int>(count), e = static_cast<int>(each);
    const MPI_Datatype ty = mpi_type(t);
    // A member that stops inside MPICH would leave these blocking calls hanging: the watchdog
    // aborts the job past the collective timeout (collectives/mpi_watchdog.hpp).
    if (op == "all_reduce") {
      BlockingCall guard(what_[0]);
      check(MPI_Allreduce(in, out, c, ty, mpi_sum(t), comm_), "MPI_Allreduce");
    } else if (op == "all_gather") {
      BlockingCall guard(what_[1]);
      check(MPI_Allgather(in, e, ty, out, e, ty, comm_), "MPI_Allgather");
    } else if (op == "reduce_scatter") {
      BlockingCall guard(what_[2]);
      check(MPI_Reduce_scatter_block(in, out, e, ty, mpi_sum(t), comm_), "MPI_Reduce_scatter_block");
    } else {
      BlockingCall guard(what_[3]);
      check(MPI_Alltoall(in, e, ty, out, e, ty, comm_), "MPI_Alltoall");
    }
  }

 private:
  static void check(int rc, const char* what) {
    if (rc != MPI_SUCCESS) throw Error(ErrorKind::device, std::string("shardlab bench collectives: ") + what + " failed");
  }
  int n_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<std::string> what_;  // each call's name and the other devices, for the watchdog
};

}  // namespace

std::unique_ptr<mpi::MpichCollectives> mpich_collectives(const Group& g) { return std::make_unique<Mpich>(g); }

}  // namespace shardlab::mpi_module
