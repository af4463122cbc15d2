// collective_permute on processes beside threads: the same blocks and ledger rows as the sim
// backend, in the three element types, for a ring shift each way and a reversal of the ranks.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "collectives/mpi.hpp"
#include "collectives/permute.hpp"
#include "collectives/runtime.hpp"

using namespace shardlab;

TEST_SUITE("mpi permute") {
  TEST_CASE("collective_permute: shifts and a reversal give sim's blocks and ledger rows") {
    const int n = mpi::world_size();
    std::vector<int> reversal(n);
    for (int r = 0; r < n; ++r) reversal[r] = n - 1 - r;
    const Mesh mesh({"X"}, {n});
    for (DType t : {DType::float64, DType::float32, DType::bfloat16}) {
      CAPTURE(dtype_name(t));
      const SpmdProgram program = [&](Device& dev) -> Outputs {
        Tensor a = xt::empty<double>(Shape{3, 700});  // 4200 elements, up to 33 KB on the wire
        for (std::size_t k = 0; k < a.size(); ++k) a.data()[k] = 10.0 * dev.id() + double(k % 7);
        return {{"up", collective_shift(dev, a, {"X"}, 1, "a")},
                {"down", collective_shift(dev, a, {"X"}, -1, "a")},
                {"rev", collective_permute(dev, a, {"X"}, reversal, "a")}};
      };
      Runtime sim(Backend::sim, false, t), rt(Backend::mpi, false, t);
      const RunResult a = sim.run(mesh, program), b = rt.run(mesh, program);
      if (!rt.is_root()) continue;
      for (int d = 0; d < n; ++d) {
        CHECK(b.outputs[d].at("up")(0, 0) == 10.0 * ((d + n - 1) % n));
        CHECK(b.outputs[d].at("down")(2, 699) == 10.0 * ((d + 1) % n) + double((2 * 700 + 699) % 7));
        CHECK(b.outputs[d].at("rev")(1, 3) == 10.0 * (n - 1 - d) + double(703 % 7));
        for (const char* k : {"up", "down", "rev"}) CHECK(a.outputs[d].at(k) == b.outputs[d].at(k));
      }
      REQUIRE(a.ledger.size() == b.ledger.size());
      for (std::size_t i = 0; i < a.ledger.size(); ++i) {
        CHECK(b.ledger[i].op == "collective_permute");
        CHECK(a.ledger[i].bytes_sent == b.ledger[i].bytes_sent);
        CHECK(a.ledger[i].bytes_received == b.ledger[i].bytes_received);
        CHECK(a.ledger[i].messages == b.ledger[i].messages);
      }
    }
  }
}
