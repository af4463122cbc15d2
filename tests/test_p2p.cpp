// collectives/p2p.cpp: send / recv between devices on the sim backend: the block arrives whole,
// each side's ledger row counts the bytes, and mismatches (a send nobody receives, a receive of
// another size, a receive nobody sends to) stop the run with a sentence naming both devices.
#include <doctest/doctest.h>

#include <string>

#include "collectives/collectives.hpp"
#include "collectives/runtime.hpp"
#include "core/error.hpp"

using namespace shardlab;

namespace {
std::string failure(const SpmdProgram& program, const std::string& mesh = "X=3") {
  Runtime rt(Backend::sim);
  try {
    rt.run(Mesh::parse(mesh), program);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::mismatch);
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_SUITE("p2p") {

TEST_CASE("p2p: a block passed down a line of devices arrives whole; each side counts it") {
  for (DType t : {DType::float64, DType::float32, DType::bfloat16}) {
    Runtime rt(Backend::sim, false, t);
    const RunResult r = rt.run(Mesh::parse("X=4"), [](Device& dev) -> Outputs {
      Tensor h = xt::zeros<double>(Shape{2, 3});
      if (dev.id() > 0) h = recv(dev, dev.id() - 1, Shape{2, 3}, "h");
      h += 1.0;  // each stage adds one
      if (dev.id() < 3) send(dev, h, dev.id() + 1, "h");
      return {{"h", h}};
    });
    const std::size_t eb = element_bytes(t);
    for (int d = 0; d < 4; ++d) CHECK(r.outputs[d].at("h")(1, 2) == d + 1);
    int sends = 0, recvs = 0;
    for (const auto& row : r.ledger) {
      if (row.op == "send") {
        ++sends;
        CHECK(row.peer == row.device + 1);
        CHECK(row.bytes_sent == 6 * eb);
        CHECK(row.messages == 1);
      } else {
        REQUIRE(row.op == "recv");
        ++recvs;
        CHECK(row.peer == row.device - 1);
        CHECK(row.bytes_received == 6 * eb);
        CHECK(row.bytes_sent == 0);
      }
    }
    CHECK(sends == 3);
    CHECK(recvs == 3);
  }
}

TEST_CASE("p2p: two devices that send to each other at once do not wait on each other") {
  Runtime rt(Backend::sim);
  const RunResult r = rt.run(Mesh::parse("X=2"), [](Device& dev) -> Outputs {
    const int other = 1 - dev.id();
    Tensor x = xt::zeros<double>(Shape{100000});  // 800 KB: not a small message
    x.fill(dev.id());
    send(dev, x, other, "x");
    return {{"x", recv(dev, other, Shape{100000}, "x")}};
  });
  CHECK(r.outputs[0].at("x")(5) == 1);
  CHECK(r.outputs[1].at("x")(5) == 0);
}

TEST_CASE("p2p: a send may wait while the two devices run a collective (as MPI's tags allow)") {
  Runtime rt(Backend::sim);
  const RunResult r = rt.run(Mesh::parse("X=2"), [](Device& dev) -> Outputs {
    if (dev.id() == 0) send(dev, Tensor{7.0}, 1, "h");
    const Tensor s = all_reduce(dev, Tensor{double(dev.id() + 1)}, {"X"}, "s");
    Tensor h = Tensor{0.0};
    if (dev.id() == 1) h = recv(dev, 0, Shape{1}, "h");
    return {{"s", s}, {"h", h}};
  });
  CHECK(r.outputs[0].at("s")(0) == 3);
  CHECK(r.outputs[1].at("h")(0) == 7);
}

TEST_CASE("p2p: mismatches stop the run with one sentence naming both devices") {
  const std::string unreceived = failure([](Device& dev) -> Outputs {
    if (dev.id() == 0) send(dev, xt::ones<double>(Shape{4}), 2, "act");
    return {};
  });
  CHECK(unreceived.find("device 0 sent act") != std::string::npos);
  CHECK(unreceived.find("to device 2, which never received it") != std::string::npos);

  const std::string sizes = failure([](Device& dev) -> Outputs {
    if (dev.id() == 0) send(dev, xt::ones<double>(Shape{4}), 1, "act");
    if (dev.id() == 1) recv(dev, 0, Shape{5}, "act");
    return {};
  });
  CHECK(sizes.find("device 1") != std::string::npos);
  CHECK(sizes.find("device 0") != std::string::npos);
  CHECK(sizes.find("expected 40 bytes") != std::string::npos);
  CHECK(sizes.find("sent 32 bytes") != std::string::npos);
  CHECK(sizes.find("messages do not match") != std::string::npos);

  // Two sends and two receives of the same size but in the other order: labels must pair up.
  const std::string swapped = failure([](Device& dev) -> Outputs {
    if (dev.id() == 0) {
      send(dev, xt::ones<double>(Shape{2}), 1, "grad_c2");
      send(dev, xt::ones<double>(Shape{2}), 1, "grad_c3");
    }
    if (dev.id() == 1) {
      recv(dev, 0, Shape{2}, "grad_c3");
      recv(dev, 0, Shape{2}, "grad_c2");
    }
    return {};
  });
  CHECK(swapped.find("grad_c2") != std::string::npos);
  CHECK(swapped.find("grad_c3") != std::string::npos);

  const std::string nobody = failure([](Device& dev) -> Outputs {
    if (dev.id() == 1) recv(dev, 2, Shape{4}, "grad");
    return {};
  });
  CHECK(nobody.find("device 1") != std::string::npos);
  CHECK(nobody.find("device 2") != std::string::npos);
  CHECK(nobody.find("recv of grad") != std::string::npos);

  Runtime rt(Backend::sim);
  CHECK_THROWS_AS(rt.run(Mesh::parse("X=2"), [](Device& dev) -> Outputs {
    send(dev, xt::ones<double>(Shape{1}), dev.id(), "self");  // not to itself
    return {};
  }), Error);
}

}  // TEST_SUITE
