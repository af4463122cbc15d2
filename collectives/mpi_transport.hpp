// MpiTransport: one MPICH process per device. The ring algorithms (ring.cpp, all_to_all.cpp) call
// sendrecv as on the sim backend; here each exchange is MPI_Irecv + MPI_Isend on the group's own
// communicator (one per set of mesh axes, from MPI_Comm_split), waited for by MpiRun::wait so
// that a failure elsewhere or a deadlock stops it instead of hanging. The base class counts the
// payload bytes for the ledger once the exchange completed.
//
// --collectives native: MPICH's MPI_Iallreduce, MPI_Iallgather, MPI_Ireduce_scatter_block and
// MPI_Ialltoall on the same communicators, completed by MpiRun::wait (so they too stop at the
// collective timeout or when another rank fails). The group first meets in an MPI_Ibarrier that
// can be abandoned: a rank starts the library collective only when every member is there.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collectives/mpi_monitor.hpp"
#include "collectives/transport.hpp"
#include "core/mesh.hpp"

namespace shardlab {

// The MPI type that carries elements of t, and the MPI_Op that sums them (bfloat16: MPI_UINT16_T
// and a user op adding in float32, created on first use, after MPI_Init).
MPI_Datatype mpi_type(DType t);
MPI_Op mpi_sum(DType t);
MPI_Op mpi_max(DType t);  // MPI_MAX, or an op of ours for bfloat16

class MpiTransport : public Transport {
 public:
  // `comms` from MpiProcess::comms(mesh); device = this rank.
  MpiTransport(MpiRun& run, const Mesh& mesh, const std::vector<MPI_Comm>& comms, int device)
      : run_(run), mesh_(mesh), comms_(comms), device_(device) {}
  // Sends still in flight after a failure are cancelled before their copies go.
  ~MpiTransport() override;

  bool native_all_reduce(const Group& g, DType t, void* buf, std::size_t n, Reduce op) override;
  bool native_all_gather(const Group& g, DType t, const void* in, std::size_t n, void* out) override;
  bool native_reduce_scatter(const Group& g, DType t, const void* in, std::size_t n_each, void* out) override;
  bool native_all_to_all(const Group& g, DType t, const void* in, std::size_t n_each, void* out) override;

 protected:
  void exchange(Channel ch, const Group& g, int to, const void* sbuf, std::size_t sbytes, int from, void* rbuf,
                std::size_t rbytes) override;
  // Large steps go as segments of 1 MiB (both sides cut the same byte count the same way); each
  // segment is added as soon as it is in, while the next ones are still moving.
  void exchange_add(const Group& g, int to, const void* sbuf, std::size_t scount, int from, const void* base,
                    void* out, std::size_t rcount, DType t, Reduce op) override;
  // A send copies the payload and posts MPI_Isend on the communicator of all devices; it is
  // completed later (at a receive, or finish_sends), so two stages that send to each other at
  // once do not wait on each other.
  void p2p_send(int to, const void* buf, std::size_t bytes) override;
  void p2p_recv(int from, void* buf, std::size_t bytes) override;

 public:
  void finish_sends() override;

 protected:

 private:
  struct GroupComm {
    MPI_Comm comm = MPI_COMM_NULL;
    std::vector<int> rank_of;  // rank_of[position in the group] = rank in comm
    bool identity = true;      // group order == communicator order
  };
  const GroupComm& comm_for(const Group& g);
  void meet(const Group& g, const GroupComm& gc);  // every member has reached the native call
  void finish_native(const Group& g, MPI_Request& r);  // waits for a native collective's request

  MpiRun& run_;
  const Mesh& mesh_;
  const std::vector<MPI_Comm>& comms_;
  int device_;
  std::map<std::vector<std::string>, GroupComm> cache_;
  struct PendingSend {
    std::vector<char> copy;
    MPI_Request request = MPI_REQUEST_NULL;
    int to = 0;
    std::string activity;
  };
  std::vector<std::unique_ptr<PendingSend>> pending_;
  const GroupComm& all_devices();
  void complete_sends(bool wait);  // drops finished sends; with wait, waits for every one
};

}  // namespace shardlab
