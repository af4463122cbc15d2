// MPI_Finalize over MPICH's UCX transport without the closing flush.
//
// MPICH's ch4:ucx finalize closes every UCX endpoint with ucp_disconnect_nb, which flushes the
// endpoint first, and keeps calling UCX's progress only until this rank's own closes are done;
// then it waits in the launcher's barrier, answering nobody. Over UCX's TCP transport, flushing an
// endpoint that has sent anything (a reply included) is a zero-length put that the peer must
// acknowledge (uct_tcp_ep_flush). A peer whose put arrives after this rank has stopped progressing
// waits for an acknowledgement that never comes, and every rank then waits for it in the barrier:
// on 4 emulated hosts, 1 run in 10 to 20 of lesson 02 hung so (seen in gdb: one rank in
// uct_tcp_iface_progress under MPI_Finalize, the others in the launcher's barrier; UCX's debug log:
// that rank's close of one endpoint never flushed, the peer's closes all had).
//
// By the time shardlab calls MPI_Finalize, every rank has received a message from every other
// after all of the run's traffic (the last roll call, collectives/mpi_exit.cpp), so nothing is in
// flight that a flush could save. So this module defines ucp_disconnect_nb itself: libmpich binds
// to it, because the module comes before UCX in the load order (collectives/mpi.cpp opens it with
// RTLD_GLOBAL, and libucp is its dependency's dependency). Until close_endpoints_without_flush it
// passes every call to UCX's own; after, it answers "closed" at once, and MPICH's next step,
// ucp_worker_destroy, closes the endpoints without a handshake. No rank then waits on another in
// finalize except in the launcher's barrier, which every rank reaches.
#include "collectives/mpi_ucx_close.hpp"

#include <dlfcn.h>

#include <atomic>

namespace shardlab {
namespace {
std::atomic<bool> without_flush{false};
}  // namespace

void close_endpoints_without_flush() { without_flush = true; }

}  // namespace shardlab

// UCX's declaration (ucp/api/ucp.h): ucs_status_ptr_t ucp_disconnect_nb(ucp_ep_h ep). Both types
// are pointers; NULL is UCS_OK, an operation completed at once.
extern "C" __attribute__((visibility("default"))) void* ucp_disconnect_nb(void* ep) {
  if (shardlab::without_flush) return nullptr;
  using Close = void* (*)(void*);
  static const Close ucx_own = reinterpret_cast<Close>(::dlsym(RTLD_NEXT, "ucp_disconnect_nb"));
  return ucx_own ? ucx_own(ep) : nullptr;
}

