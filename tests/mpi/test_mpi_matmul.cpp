// Lessons 03-07 and `shardlab matmul` on 8 MPI processes: the same verdicts and bytes per device
// as on the sim backend. Rank 0 runs them (a nested mpiexec with a clean environment); the other
// ranks skip. The nested runs do not depend on this suite's own rank count, so they run only in
// a suite of at most 2 ranks (make test-mpi runs 2, then 8): 8 idle ranks polling beside 8 nested
// ones would only slow both down on a small machine.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

#include <unistd.h>

#include "collectives/mpi.hpp"
#include "harness/check/npy.hpp"
#include "core/einsum.hpp"
#include "tests/run_binary.hpp"

using shardlab::testing::run_binary;

namespace {
const std::string kMpi8 = shardlab::testing::clean_mpiexec(8);

// The fields that must not depend on the backend: verdict, and per collective op, axes, tensor,
// group, messages and bytes.
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
  TEST_CASE("lessons 03-07 under mpiexec -n 8: PASS, with the sim run's collectives and bytes") {
    if (!runs_here()) return;
    for (const char* lesson : {"03_dot_product_and_matmul", "04_inner_axes_match", "05_inner_axes_mismatch",
                               "06_outer_axes", "07_full_sharding"}) {
      CAPTURE(lesson);
      auto sim = run_binary(std::string(lesson) + " --json");
      auto mpi = run_binary(std::string(lesson) + " --json --backend mpi", kMpi8);
      REQUIRE(sim.status == 0);
      REQUIRE(mpi.status == 0);
      CHECK(backend_free(mpi.out) == backend_free(sim.out));
      CHECK(nlohmann::json::parse(mpi.out)["backend"] == "mpi");
      auto bad = run_binary(std::string(lesson) + " --quiet --backend mpi --inject perturb:1e-3", kMpi8);
      CHECK(bad.status == 1);
    }
  }

  TEST_CASE("shardlab matmul under mpiexec -n 8 writes the matmul of its .npy inputs") {
    if (!runs_here()) return;
    using namespace shardlab;
    const std::string base = "/tmp/shardlab_mpi_matmul_" + std::to_string(::getpid());
    const std::string a_in = base + "_a.npy", b_in = base + "_b.npy", c_out = base + "_c.npy";
    const Tensor a = random_integers({8, 16}, 5, -4, 4), b = random_integers({16, 8}, 6, -4, 4);
    save_npy(a_in, a);
    save_npy(b_in, b);
    for (const char* specs : {"--a-spec _,Y --b-spec Y,_ --out-spec X,Y", "--a-spec X,Y --b-spec X,Y",
                              "--a-spec '(X,Y),_' --b-spec _,_"}) {
      CAPTURE(specs);
      std::remove(c_out.c_str());
      auto r = run_binary("shardlab matmul " + std::string(specs) + " --backend mpi --quiet --a-in " + a_in +
                              " --b-in " + b_in + " --out " + c_out,
                          kMpi8);
      CHECK(r.status == 0);
      CHECK(load_npy(c_out).data == reference_einsum(Einsum::parse("ik,kj->ij"), a, b));  // integers: exact
    }
    for (const auto& p : {a_in, b_in, c_out}) std::remove(p.c_str());
  }
}
