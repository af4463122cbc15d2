// Uneven blocks on 4 MPI processes: `shardlab matmul` with dims that do not divide X=4,
// chunked and padded, through AllGather, ReduceScatter and AllToAll of uneven blocks written on
// send/recv: the same verdict, collectives and bytes as the sim run. Rank 0 runs them (a nested
// mpiexec -n 4); other ranks skip, and only in a suite of at most 2 ranks (as test_mpi_matmul.cpp).
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "collectives/mpi.hpp"
#include "tests/run_binary.hpp"

using shardlab::testing::run_binary;

namespace {
const std::string kMpi4 = shardlab::testing::clean_mpiexec(4);

nlohmann::json same_fields(const std::string& out) {
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
}  // namespace

TEST_SUITE("mpi binaries") {
  TEST_CASE("shardlab matmul on uneven dims under mpiexec -n 4: PASS with the sim run's bytes, chunk and pad") {
    if (!shardlab::mpi::is_root() || shardlab::mpi::world_size() > 2) return;
    for (const char* rule : {"chunk", "pad"})
      for (const char* args : {"--a-spec X,_ --b-spec _,_ --shape 10,4,3 --out-spec _,_",  // AllGather
                               "--a-spec _,X --b-spec X,_ --shape 5,10,3 --out-spec X,_",  // ReduceScatter
                               "--a-spec X,_ --b-spec _,_ --shape 9,9,9 --out-spec _,X"}) {  // AllToAll (search)
        const std::string cmd = std::string("shardlab matmul --mesh X=4 --json --uneven ") + rule + " " + args;
        CAPTURE(cmd);
        auto sim = run_binary(cmd);
        auto mpi = run_binary(cmd + " --backend mpi", kMpi4);
        REQUIRE(sim.status == 0);
        REQUIRE(mpi.status == 0);
        CHECK(same_fields(mpi.out) == same_fields(sim.out));
        CHECK(same_fields(sim.out)["collectives"].size() >= 1);
      }
  }
}
