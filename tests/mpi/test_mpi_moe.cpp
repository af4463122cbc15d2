// Lesson 20 (expert parallelism) on 4 MPI processes: the sim run's verdict, drops and bytes in every
// element type, and a planted swap-blocks caught. Rank 0 runs it (a nested mpiexec with a clean
// environment), only in a suite of at most 2 ranks, as tests/mpi/test_mpi_binaries.cpp does.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "collectives/mpi.hpp"
#include "tests/run_binary.hpp"

using shardlab::testing::run_binary;

namespace {
const std::string kLaunch = shardlab::testing::clean_mpiexec(4);
bool runs_here() { return shardlab::mpi::is_root() && shardlab::mpi::world_size() <= 2; }
}  // namespace

TEST_SUITE("mpi binaries") {
  TEST_CASE("lesson 20 under mpiexec -n 4: the sim run's verdict, drops and bytes; swap-blocks caught") {
    if (!runs_here()) return;
    for (const char* type : {"float32", "float64", "bfloat16"}) {
      CAPTURE(type);
      const std::string args = std::string("20_expert_parallel --json --dtype ") + type;
      auto mpi = run_binary(args + " --backend mpi", kLaunch);
      auto sim = run_binary(args);
      REQUIRE(mpi.status == 0);
      REQUIRE(sim.status == 0);
      const auto m = nlohmann::json::parse(mpi.out), s = nlohmann::json::parse(sim.out);
      CHECK(m["backend"] == "mpi");
      CHECK(m["pass"] == true);
      CHECK(m["dropped"].get<double>() > 0);
      CHECK(m["dropped"] == s["dropped"]);
      CHECK(m["bytes_per_device"] == s["bytes_per_device"]);
      REQUIRE(m["collectives"].size() == s["collectives"].size());
      for (std::size_t i = 0; i < m["collectives"].size(); ++i)
        CHECK(m["collectives"][i]["bytes_per_device"] == m["collectives"][i]["predicted_bytes_per_device"]);
    }
    CHECK(run_binary("20_expert_parallel --backend mpi --quiet --inject swap-blocks", kLaunch).status == 1);
  }
}
