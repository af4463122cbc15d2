// The mpi backend's module: build/lib/libshardlab_mpi.so, built from collectives/mpi_run.cpp,
// mpi_world.cpp, mpi_exit.cpp, mpi_monitor.cpp, mpi_watchdog.cpp, mpi_transport.cpp and
// mpich_calls.cpp and linked with MPICH; nothing else is.
// Programs load it with dlopen on their first mpi:: call (collectives/mpi.cpp) and find its
// functions in one table. The module uses the program's own shardlab code (Device, Ledger, Error),
// which programs export for it (-rdynamic), so there is one copy of each.
#pragma once
#include "collectives/mpi.hpp"

namespace shardlab::mpi_module {

void start();
void stop();
bool is_root();
int rank();
int world_size();
void check_world(const Mesh& mesh);
RunResult run(const Mesh& mesh, const SpmdProgram& program, bool native, DType dtype, bool trace, const Fault& fault);
int agree(int status);
std::string library_version();
std::unique_ptr<mpi::MpichCollectives> mpich_collectives(const Group& g);

// The table: a program built from other sources than its module finds out at once.
struct Table {
  int version;
  void (*start)();
  void (*stop)();
  bool (*is_root)();
  int (*rank)();
  int (*world_size)();
  void (*check_world)(const Mesh&);
  RunResult (*run)(const Mesh&, const SpmdProgram&, bool, DType, bool, const Fault&);
  int (*agree)(int);
  std::string (*library_version)();
  std::unique_ptr<mpi::MpichCollectives> (*mpich_collectives)(const Group&);
};
constexpr int kTableVersion = 1;

}  // namespace shardlab::mpi_module

// The module's one exported name, looked up with dlsym.
extern "C" const shardlab::mpi_module::Table* shardlab_mpi_module();
