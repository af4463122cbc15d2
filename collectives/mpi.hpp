// The mpi backend's entry points, used by Runtime (collectives/runtime.cpp). One MPICH process per
// device: mpiexec -n <devices> build/bin/<program> --backend mpi.
#pragma once
#include <string>

#include "collectives/runtime.hpp"

namespace shardlab::mpi {

void start();  // MPI_Init once per process (idempotent); MPI_Finalize runs at process exit
void stop();   // a Runtime is done with MPI; the process keeps it until exit (tests run many)
bool is_root();
int world_size();
// Error(world_size) on every rank when the world does not have one process per device of `mesh`.
void check_world(const Mesh& mesh);
// check_world, then `program` on this rank's device; outputs and ledger rows gathered on rank 0.
// A failure on any rank becomes the same Error on every rank.
// `trace`: record the device's compute spans (core/trace.hpp) and gather them too.
RunResult run(const Mesh& mesh, const Program& program, bool native, DType dtype, bool trace = false,
              const Fault& fault = {});
int agree(int status);          // the largest status over all ranks
std::string library_version();  // "MPICH Version: 4.0.2 ..." (first line)

}  // namespace shardlab::mpi
