// Lessons 08-10 and `shardlab ffn` on MPI processes: the same verdicts, collectives and bytes per
// device as on the sim backend. Rank 0 runs them (a nested mpiexec with a clean environment); like
// test_mpi_matmul.cpp, only in a suite of at most 2 ranks.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "collectives/mpi.hpp"
#include "tests/run_binary.hpp"

using shardlab::testing::clean_mpiexec;
using shardlab::testing::run_binary;

namespace {
nlohmann::json backend_free(const std::string& out) {
  auto j = nlohmann::json::parse(out);
  nlohmann::json keep;
  keep["pass"] = j["pass"];
  keep["bytes_per_device"] = j["bytes_per_device"];
  for (auto c : j["collectives"]) {
    for (const char* k : {"seconds", "algorithm", "modeled"}) c.erase(k);
    keep["collectives"].push_back(c);
  }
  return keep;
}
bool runs_here() { return shardlab::mpi::is_root() && shardlab::mpi::world_size() <= 2; }
}  // namespace

TEST_SUITE("mpi binaries") {
  TEST_CASE("ffn lessons 08-10 and shardlab ffn under mpiexec: PASS, with the sim run's collectives and bytes") {
    if (!runs_here()) return;
    // perturbed: also run with one element moved, which must FAIL on processes too. Once per
    // strategy (gspmd, pairwise, data): the lessons and shardlab ffn verify through the same code.
    struct Run {
      const char* cmd;
      int n;
      bool perturbed;
    };
    const Run runs[] = {{"08_gspmd_ffn", 8, true},
                        {"09_column_row_pairwise", 4, false},
                        {"10_pairwise_backward", 4, true},
                        {"shardlab ffn --strategy gspmd --backward", 8, false},
                        {"shardlab ffn --strategy pairwise --backward", 4, false},
                        {"shardlab ffn --strategy data --mesh X=2,Y=4 --backward", 8, true}};
    for (const auto& [cmd, n, perturbed] : runs) {
      CAPTURE(cmd);
      auto sim = run_binary(std::string(cmd) + " --json");
      auto mpi = run_binary(std::string(cmd) + " --json --backend mpi", clean_mpiexec(n));
      REQUIRE(sim.status == 0);
      REQUIRE(mpi.status == 0);
      CHECK(backend_free(mpi.out) == backend_free(sim.out));
      CHECK(nlohmann::json::parse(mpi.out)["backend"] == "mpi");
      if (perturbed)
        CHECK(run_binary(std::string(cmd) + " --quiet --backend mpi --inject perturb:1e-3", clean_mpiexec(n)).status == 1);
    }
  }

  TEST_CASE("one-axis lessons under mpiexec -n 8 without --mesh: a line of 8, as the sim run on Y=8") {
    if (!runs_here()) return;
    for (const char* lesson : {"09_column_row_pairwise", "10_pairwise_backward"}) {
      const std::string cmd = lesson;
      CAPTURE(cmd);
      auto sim = run_binary(cmd + " --json --mesh Y=8");
      auto mpi = run_binary(cmd + " --json --backend mpi", clean_mpiexec(8));
      REQUIRE(sim.status == 0);
      REQUIRE(mpi.status == 0);
      CHECK(nlohmann::json::parse(mpi.out)["mesh"]["Y"] == 8);
      CHECK(backend_free(mpi.out) == backend_free(sim.out));
    }
  }
}
