// collectives/mpi.cpp: the mpi backend is a module programs load on their first mpi:: call.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "tests/run_binary.hpp"

using shardlab::testing::bin_dir;
using shardlab::testing::run_line;

TEST_CASE("mpi module: a sim run never loads MPICH; --backend mpi loads the module beside bin/") {
  CHECK(std::ifstream(bin_dir() + "/../lib/libshardlab_mpi.so").good());
  // The dynamic loader lists every object it maps on stderr (LD_DEBUG=files): on sim, no MPI.
  const auto sim = run_line("LD_DEBUG=files " + bin_dir() + "/03_dot_product_and_matmul --quiet");
  CHECK(sim.status == 0);
  CHECK(sim.out.find("PASS 03_dot_product_and_matmul") != std::string::npos);
  CHECK(sim.err.find("libmpich") == std::string::npos);
  CHECK(sim.err.find("libshardlab_mpi") == std::string::npos);
  // On one MPI process (a world of one: no mpiexec needed) it loads the module, and MPICH with it.
  const auto mpi = run_line("LD_DEBUG=files " + bin_dir() + "/01_mesh_and_layout --mesh X=1 --backend mpi --quiet");
  CHECK(mpi.status == 0);
  CHECK(mpi.err.find("libshardlab_mpi.so") != std::string::npos);
  CHECK(mpi.err.find("libmpich") != std::string::npos);
}

TEST_CASE("mpi module: a program without its module says so in one sentence, exit 3") {
  // The program copied where no lib/ sits beside its folder: a broken build, not bad input.
  char dir[] = "/tmp/shardlab_test_mpi_XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string bin = std::string(dir) + "/bin";
  const bool copied = run_line("mkdir " + bin + " && cp -L " + bin_dir() + "/01_mesh_and_layout " + bin + "/").status == 0;
  const auto sim = run_line(bin + "/01_mesh_and_layout --quiet");
  const auto mpi = run_line(bin + "/01_mesh_and_layout --mesh X=1 --backend mpi --quiet");
  run_line("rm -rf " + std::string(dir));
  REQUIRE(copied);
  CHECK(sim.status == 0);  // the sim backend needs no module
  CHECK(mpi.status == 3);
  CHECK(mpi.out.empty());
  CHECK(mpi.err.rfind("error: the mpi backend could not be loaded (", 0) == 0);
  CHECK(mpi.err.find("libshardlab_mpi.so") != std::string::npos);
  CHECK(std::count(mpi.err.begin(), mpi.err.end(), '\n') == 1);
}
