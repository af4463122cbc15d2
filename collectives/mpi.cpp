// Placeholder until the MPI transport lands (issue 3): the mpi backend reports that it is missing.
#include "collectives/mpi.hpp"

#include "core/error.hpp"

namespace shardlab::mpi {

void start() {}
void stop() {}
bool is_root() { return process_is_root(); }
int world_size() { return 1; }
RunResult run(const Mesh&, const Program&, bool) {
  throw Error(ErrorKind::unsupported, "the mpi backend is not built yet; use --backend sim");
}
int agree(int status) { return status; }

}  // namespace shardlab::mpi
