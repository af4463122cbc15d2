// The mpi backend's entry points, used by Runtime (collectives/runtime.cpp). One MPICH process per
// device: mpiexec -n <devices> build/bin/<program> --backend mpi.
//
// The backend itself (collectives/mpi_run.cpp, mpi_world, mpi_transport, mpich_calls) is a module
// of its own, build/lib/libshardlab_mpi.so, the only code linked with MPICH. The first call below
// loads it (collectives/mpi.cpp); a program on the sim backend never does, and so never maps
// MPICH, UCX and hwloc (mapping them is much of a program's start, and the suite starts thousands).
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "collectives/runtime.hpp"

namespace shardlab {
struct Group;
}

namespace shardlab::mpi {

void start();  // MPI_Init once per process (idempotent); MPI_Finalize runs at process exit
void stop();   // a Runtime is done with MPI; the process keeps it until exit (tests run many)
bool is_root();
int rank();
int world_size();
// Error(world_size) on every rank when the world does not have one process per device of `mesh`.
void check_world(const Mesh& mesh);
// check_world, then `program` on this rank's device; outputs and ledger rows gathered on rank 0.
// A failure on any rank becomes the same Error on every rank.
// `trace`: record the device's compute spans (core/trace.hpp) and gather them too.
RunResult run(const Mesh& mesh, const SpmdProgram& program, bool native, DType dtype, bool trace = false,
              const Fault& fault = {});
int agree(int status);          // the largest status over all ranks
std::string library_version();  // "MPICH Version: 4.0.2 ..." (first line)

// MPICH's own collectives, called directly on a communicator of a group (shardlab bench
// collectives puts them beside ours). Made by every member of the group together.
class MpichCollectives {
 public:
  virtual ~MpichCollectives() = default;
  // op: all_reduce, all_gather, reduce_scatter or all_to_all. `in` holds the op's input (count/n
  // elements of type t for all_gather, count otherwise); `out` its output (count/n elements for
  // reduce_scatter, count otherwise).
  virtual void call(const std::string& op, DType t, const void* in, std::size_t count, void* out) const = 0;
};
std::unique_ptr<MpichCollectives> mpich_collectives(const Group& g);

}  // namespace shardlab::mpi
