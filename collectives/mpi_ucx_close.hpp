// MPI_Finalize over MPICH's UCX transport without the closing flush (part of the mpi backend's
// module; collectives/mpi_ucx_close.cpp says why).
#pragma once

namespace shardlab {

// From now on, MPICH's closes of UCX endpoints skip their flush. Call only once every rank is
// known to have received everything sent to it (the last roll call), right before MPI_Finalize.
void close_endpoints_without_flush();

}  // namespace shardlab
