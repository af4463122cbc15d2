// send / recv on processes: the same blocks and ledger rows as on threads; mismatches (a send
// nobody receives, a receive of another size, a receive nobody sends to) end as one Error naming
// both devices on every rank, never as a hang.
#include <doctest/doctest.h>

#include <string>

#include "collectives/collectives.hpp"
#include "collectives/mpi.hpp"
#include "collectives/runtime.hpp"
#include "core/error.hpp"

using namespace shardlab;

namespace {
int world() { return mpi::world_size(); }
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string failure(Runtime& rt, const SpmdProgram& program) {
  try {
    rt.run(Mesh({"X"}, {world()}), program);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::mismatch);
    return e.what();
  }
  FAIL("the run did not fail");
  return "";
}

// A block down the line and a larger one back up, as a pipeline's forward and backward.
Outputs line(Device& dev) {
  const int n = dev.mesh().devices(), d = dev.id();
  Tensor h = xt::zeros<double>(Shape{2, 3});
  if (d > 0) h = recv(dev, d - 1, Shape{2, 3}, "h");
  h += 1.0;
  if (d < n - 1) send(dev, h, d + 1, "h");
  Tensor g = xt::zeros<double>(Shape{50000});  // 400 KB: beyond MPICH's eager limit
  if (d < n - 1) g = recv(dev, d + 1, Shape{50000}, "dh");
  g += 1.0;
  if (d > 0) send(dev, g, d - 1, "dh");
  return {{"h", h}, {"g", Tensor{g(0)}}};
}
}  // namespace

TEST_SUITE("mpi p2p") {
  TEST_CASE("send/recv down and back up a line of processes: sim's blocks and ledger rows") {
    Runtime sim(Backend::sim), rt(Backend::mpi);
    const Mesh mesh({"X"}, {world()});
    const RunResult a = sim.run(mesh, line), b = rt.run(mesh, line);
    if (!rt.is_root()) return;
    for (int d = 0; d < world(); ++d) {
      CHECK(b.outputs[d].at("h")(0, 0) == d + 1);
      CHECK(b.outputs[d].at("g")(0) == world() - d);
      CHECK(a.outputs[d].at("h") == b.outputs[d].at("h"));
    }
    REQUIRE(a.ledger.size() == b.ledger.size());
    for (std::size_t i = 0; i < a.ledger.size(); ++i) {
      CHECK(a.ledger[i].op == b.ledger[i].op);
      CHECK(a.ledger[i].peer == b.ledger[i].peer);
      CHECK(a.ledger[i].bytes_sent == b.ledger[i].bytes_sent);
      CHECK(a.ledger[i].bytes_received == b.ledger[i].bytes_received);
    }
  }

  TEST_CASE("a send may wait while the two ranks run a collective, as on the sim backend") {
    Runtime sim(Backend::sim), rt(Backend::mpi);
    const Mesh mesh({"X"}, {world()});
    const SpmdProgram program = [](Device& dev) -> Outputs {
      if (dev.id() == 0) send(dev, Tensor{7.0}, 1, "h");
      const Tensor s = all_reduce(dev, Tensor{1.0}, {"X"}, "s");
      Tensor h = Tensor{0.0};
      if (dev.id() == 1) h = recv(dev, 0, Shape{1}, "h");
      return {{"s", s}, {"h", h}};
    };
    const RunResult a = sim.run(mesh, program), b = rt.run(mesh, program);
    if (!rt.is_root()) return;
    CHECK(b.outputs[1].at("h")(0) == 7);
    CHECK(b.outputs[0].at("s")(0) == world());
    CHECK(a.outputs[1].at("h")(0) == 7);
  }

  TEST_CASE("a send nobody receives, small or large, is named on every rank") {
    Runtime rt(Backend::mpi);
    for (std::size_t n : {std::size_t{4}, std::size_t{100000}}) {
      CAPTURE(n);
      const std::string e = failure(rt, [n](Device& dev) -> Outputs {
        if (dev.id() == 0) send(dev, xt::zeros<double>(Shape{n}), 1, "act");
        return {};
      });
      CHECK(has(e, "device 0"));
      CHECK(has(e, "device 1"));
      CHECK((has(e, "never received it") || has(e, "finished its program without taking part")));
    }
  }

  TEST_CASE("a receive of another size, and a receive nobody sends to, are named") {
    Runtime rt(Backend::mpi);
    const std::string sizes = failure(rt, [](Device& dev) -> Outputs {
      if (dev.id() == 0) send(dev, xt::zeros<double>(Shape{4}), 1, "act");
      if (dev.id() == 1) recv(dev, 0, Shape{5}, "act");
      return {};
    });
    CHECK(has(sizes, "device 1"));
    CHECK(has(sizes, "device 0"));
    const std::string nobody = failure(rt, [](Device& dev) -> Outputs {
      if (dev.id() == 1) recv(dev, 0, Shape{4}, "grad");
      return {};
    });
    CHECK(has(nobody, "device 1"));
    CHECK(has(nobody, "device 0"));
  }
}
