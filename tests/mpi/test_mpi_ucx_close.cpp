// The mpi backend's module stands in for UCX's ucp_disconnect_nb (collectives/mpi_ucx_close.cpp):
// MPICH must find the module's, or a finalize over UCX's TCP transport can hang on a peer that
// stopped progressing. MPICH looks it up in the process's global scope, as dlsym(RTLD_DEFAULT) does.
#include <dlfcn.h>

#include <doctest/doctest.h>

#include <string>

#include "collectives/mpi.hpp"

TEST_CASE("MPICH's endpoint closes go through the mpi module, ahead of UCX's own") {
  REQUIRE(shardlab::mpi::world_size() >= 1);  // the module is loaded
  void* close = ::dlsym(RTLD_DEFAULT, "ucp_disconnect_nb");
  REQUIRE(close != nullptr);
  Dl_info where{};
  REQUIRE(::dladdr(close, &where) != 0);
  const std::string library = where.dli_fname ? where.dli_fname : "(no file)";
  INFO("ucp_disconnect_nb is found in " << library);
  CHECK(library.find("libshardlab_mpi.so") != std::string::npos);
}
