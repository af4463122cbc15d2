// The mpi backend's entry points, used by Runtime (collectives/runtime.cpp).
#pragma once
#include "collectives/runtime.hpp"

namespace shardlab::mpi {

void start();  // MPI_Init once per process (idempotent)
void stop();   // MPI_Finalize if started here
bool is_root();
int world_size();
RunResult run(const Mesh& mesh, const Program& program, bool native);
int agree(int status);

}  // namespace shardlab::mpi
