// Binaries started the wrong way, as a learner might: one sentence on stderr and exit 2, within
// seconds; and the collectives benchmark. Rank 0 runs them (a nested mpiexec with a clean
// environment), only in a suite of at most 2 ranks: they do not depend on its rank count, and idle
// ranks polling beside nested ones only slow a small machine down.
#include <doctest/doctest.h>

#include "collectives/mpi.hpp"
#include "tests/run_binary.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

namespace {
// A clean environment: the child must not join this job's process manager.
const std::string kClean = "env -i PATH=\"$PATH\" HOME=\"$HOME\" ";
bool runs_here() { return shardlab::mpi::is_root() && shardlab::mpi::world_size() <= 2; }
}  // namespace

TEST_SUITE("mpi binaries") {
  TEST_CASE("mpiexec with more processes than the mesh has devices: one sentence, exit 2") {
    if (!runs_here()) return;
    auto r = run_binary("shardlab bench collectives --backend mpi --mesh X=2 --max 1K", kClean + "mpiexec -n 3 ");
    CHECK(r.status == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find("mesh X=2 needs 2 processes, mpiexec started 3") != std::string::npos);
    CHECK(r.out.empty());
  }

  TEST_CASE("every lesson and command on the wrong process count: one sentence before any output, exit 2") {
    if (!runs_here()) return;
    // Default meshes have 8 devices; 3 processes fit none of them. Lessons 09 and 10 would take a
    // line of 3 by default, so they are given their usual Y=4.
    for (const char* program : {"01_mesh_and_layout", "02_reduction_allreduce", "03_dot_product_and_matmul",
                                "04_inner_axes_match", "05_inner_axes_mismatch", "06_outer_axes",
                                "07_full_sharding", "08_gspmd_ffn", "09_column_row_pairwise --mesh Y=4",
                                "10_pairwise_backward --mesh Y=4", "shardlab matmul --a-spec _,Y --b-spec Y,_", "shardlab ffn"}) {
      const std::string name = program;
      CAPTURE(name);
      auto r = run_binary(std::string(program) + " --backend mpi", kClean + "mpiexec -n 3 ");
      CHECK(r.status == 2);
      CHECK(count_lines(r.err) == 1);
      CHECK(r.err.find("processes, mpiexec started 3") != std::string::npos);
      CHECK(r.out.empty());
    }
  }

  TEST_CASE("--plan-only runs on no devices, so any process count will do") {
    if (!runs_here()) return;
    for (const std::string& launch : {kClean, kClean + "mpiexec -n 2 "}) {  // clean: not this job's PMI
      CAPTURE(launch);
      auto r = run_binary("shardlab matmul --a-spec _,Y --b-spec Y,_ --plan-only --backend mpi", launch);
      CHECK(r.status == 0);
      CHECK(r.err.empty());
      // Printed once (by rank 0), however many processes. One ring AllReduce of the 4x4 C in the
      // default float32 over Y (4 devices): 2(n-1)/n x 64 bytes.
      CHECK(r.out.find("predicted: 96 bytes sent per device in 1 collective") != std::string::npos);
      const std::size_t first = r.out.find("Plan for");
      CHECK(first != std::string::npos);
      CHECK(r.out.find("Plan for", first + 1) == std::string::npos);
    }
  }

  TEST_CASE("--backend mpi without mpiexec on a mesh of 2: one sentence that says how, exit 2") {
    if (!runs_here()) return;
    auto r = run_binary("shardlab bench collectives --backend mpi --mesh X=2 --max 1K", kClean);
    CHECK(r.status == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find("not started by mpiexec") != std::string::npos);
    CHECK(r.err.find("mpiexec -n 2 ") != std::string::npos);
  }

  TEST_CASE("the collectives benchmark at 2 ranks: every size checked, #wrong 0, ours and native side by side") {
    if (!runs_here()) return;
    auto r = run_binary("shardlab bench collectives --backend mpi --max 8K --iters 1 --warmup 0",
                        kClean + "mpiexec -n 2 ");
    CHECK(r.status == 0);
    CHECK(r.out.find("# total #wrong: 0") != std::string::npos);
    for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}) CHECK(r.out.find(op) != std::string::npos);
    CHECK(r.out.find("MPICH") != std::string::npos);
  }

  TEST_CASE("the benchmark on the sim backend: ours only, and a wrong expectation shows as #wrong and exit 1") {
    if (!runs_here()) return;
    auto ok = run_binary("shardlab bench collectives --max 4K --iters 1 --warmup 0");
    CHECK(ok.status == 0);
    CHECK(ok.out.find("# total #wrong: 0") != std::string::npos);
    CHECK(ok.out.find("native_us") == std::string::npos);
    auto bad = run_binary("shardlab bench collectives --max 4K --iters 1 --warmup 0 --perturb-expected");
    CHECK(bad.status == 1);
    CHECK(bad.out.find("# total #wrong: 0") == std::string::npos);
  }
}
