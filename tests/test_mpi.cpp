// collectives/mpi.cpp: the mpi backend is a module programs load on their first mpi:: call.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "tests/run_binary.hpp"

using shardlab::testing::bin_dir;

namespace {
// stdout and stderr of a shell command together, and its exit status.
std::pair<int, std::string> shell(const std::string& command) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return {-1, out};
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int raw = ::pclose(p);
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, out};
}
}  // namespace

TEST_CASE("mpi module: a sim run never loads MPICH; --backend mpi loads the module beside bin/") {
  CHECK(std::ifstream(bin_dir() + "/../lib/libshardlab_mpi.so").good());
  // The dynamic loader lists every object it maps (LD_DEBUG=files): on the sim backend, no MPI.
  const auto sim = shell("LD_DEBUG=files " + bin_dir() + "/03_dot_product_and_matmul --quiet");
  CHECK(sim.first == 0);
  CHECK(sim.second.find("PASS 03_dot_product_and_matmul") != std::string::npos);
  CHECK(sim.second.find("libmpich") == std::string::npos);
  CHECK(sim.second.find("libshardlab_mpi") == std::string::npos);
  // On one MPI process (a world of one: no mpiexec needed) it loads the module, and MPICH with it.
  const auto mpi = shell("LD_DEBUG=files " + bin_dir() + "/01_mesh_and_layout --mesh X=1 --backend mpi --quiet");
  CHECK(mpi.first == 0);
  CHECK(mpi.second.find("libshardlab_mpi.so") != std::string::npos);
  CHECK(mpi.second.find("libmpich") != std::string::npos);
}

TEST_CASE("mpi module: a program without its module says so in one sentence, exit 3") {
  // The program copied where no lib/ sits beside its folder: a broken build, not bad input.
  char dir[] = "/tmp/shardlab_test_mpi_XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string bin = std::string(dir) + "/bin";
  const bool copied = shell("mkdir " + bin + " && cp -L " + bin_dir() + "/01_mesh_and_layout " + bin + "/").first == 0;
  const auto sim = shell(bin + "/01_mesh_and_layout --quiet");
  const auto mpi = shell(bin + "/01_mesh_and_layout --mesh X=1 --backend mpi --quiet");
  shell("rm -rf " + std::string(dir));
  REQUIRE(copied);
  CHECK(sim.first == 0);  // the sim backend needs no module
  CHECK(mpi.first == 3);
  CHECK(mpi.second.rfind("error: the mpi backend could not be loaded (", 0) == 0);
  CHECK(mpi.second.find("libshardlab_mpi.so") != std::string::npos);
  CHECK(std::count(mpi.second.begin(), mpi.second.end(), '\n') == 1);
}
