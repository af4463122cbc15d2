// collectives/runtime.cpp: backends, running one SPMD program per device on the sim backend, the
// Device handle each program gets, and the transport counters the ledger reads.
#include <doctest/doctest.h>

#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "collectives/collectives.hpp"
#include "collectives/runtime.hpp"
#include "core/error.hpp"

using namespace shardlab;

TEST_SUITE("runtime") {

TEST_CASE("runtime: parse_backend and backend_name") {
  CHECK(parse_backend("sim") == Backend::sim);
  CHECK(parse_backend("mpi") == Backend::mpi);
  CHECK(backend_name(Backend::sim) == "sim");
  CHECK(backend_name(Backend::mpi) == "mpi");
  for (const std::string bad : {"gpu", "", "SIM", " sim"}) {
    CAPTURE(bad);
    try {
      parse_backend(bad);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::parse);
      CHECK(std::string(e.what()).find("'" + bad + "'") != std::string::npos);
    }
  }
}

TEST_CASE("runtime: sim properties") {
  Runtime rt(Backend::sim);
  CHECK(rt.backend() == Backend::sim);
  CHECK_FALSE(rt.native());
  CHECK(rt.is_root());
  CHECK(rt.agree(0) == 0);
  CHECK(rt.agree(1) == 1);
  CHECK(rt.agree(2) == 2);
}

TEST_CASE("runtime: native collectives need the mpi backend") {
  Runtime rt(Backend::sim, true);
  CHECK(rt.native());
  try {
    rt.run(Mesh::parse("2"), [](Device&) { return Outputs{}; });
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::unsupported);
    CHECK(std::string(e.what()).find("mpi") != std::string::npos);
  }
}

TEST_CASE("runtime: every device runs the program on its own thread and returns its outputs") {
  const Mesh mesh = Mesh::parse("X=2,Y=4");
  Runtime rt(Backend::sim);
  std::vector<std::thread::id> thread_of(8);
  RunResult r = rt.run(mesh, [&](Device& dev) {
    thread_of[static_cast<std::size_t>(dev.id())] = std::this_thread::get_id();  // one slot per device
    Outputs o;
    o["id"] = Tensor{static_cast<double>(dev.id())};
    auto c = dev.coords();
    o["coords"] = Tensor{static_cast<double>(c[0]), static_cast<double>(c[1])};
    o["y"] = Tensor{static_cast<double>(dev.coord("Y"))};
    o["devices"] = Tensor{static_cast<double>(dev.mesh().devices())};
    return o;
  });
  REQUIRE(r.outputs.size() == 8u);
  CHECK(r.ledger.empty());  // no collectives, no rows
  std::set<std::thread::id> distinct(thread_of.begin(), thread_of.end());
  CHECK(distinct.size() == 8u);
  CHECK(distinct.count(std::this_thread::get_id()) == 0);
  for (int d = 0; d < 8; ++d) {
    CAPTURE(d);
    CHECK(r.outputs[d].size() == 4u);
    CHECK(r.outputs[d].at("id")(0) == d);
    CHECK(r.outputs[d].at("coords")(0) == d / 4);  // row-major: d = 4x + y
    CHECK(r.outputs[d].at("coords")(1) == d % 4);
    CHECK(r.outputs[d].at("y")(0) == d % 4);
    CHECK(r.outputs[d].at("devices")(0) == 8);
  }
}

TEST_CASE("runtime: a device's group handle") {
  const Mesh mesh = Mesh::parse("X=2,Y=4");
  Runtime rt(Backend::sim);
  std::vector<Group> y_group(8), yx_group(8);
  rt.run(mesh, [&](Device& dev) {
    y_group[static_cast<std::size_t>(dev.id())] = dev.group({"Y"});
    yx_group[static_cast<std::size_t>(dev.id())] = dev.group({"Y", "X"});
    return Outputs{};
  });
  const Group& g = y_group[6];  // row x=1: devices 4..7, device 6 at position 2
  CHECK(g.axes == std::vector<std::string>{"Y"});
  CHECK(g.members == std::vector<int>{4, 5, 6, 7});
  CHECK(g.me == 2);
  CHECK(g.size() == 4);
  CHECK(g.next() == 3);
  CHECK(g.prev() == 1);
  CHECK(y_group[4].prev() == 3);  // the ring wraps
  CHECK(y_group[7].next() == 0);
  const Group& h = yx_group[6];  // Y major: 0,4,1,5,2,6,3,7; device 6 at position 5
  CHECK(h.members == std::vector<int>{0, 4, 1, 5, 2, 6, 3, 7});
  CHECK(h.me == 5);
}

TEST_CASE("runtime: ledger rows come back by device, then call") {
  const Mesh mesh = Mesh::parse("4");
  Runtime rt(Backend::sim);
  RunResult r = rt.run(mesh, [](Device& dev) {
    Tensor t = xt::zeros<double>(Shape{4});
    t.fill(1.0);
    t = all_reduce(dev, t, {"X"}, "a");
    t = all_reduce(dev, t, {"X"}, "b");
    return Outputs{{"t", t}};
  });
  REQUIRE(r.ledger.size() == 8u);
  for (std::size_t k = 0; k < 8; ++k) {
    CHECK(r.ledger[k].device == static_cast<int>(k / 2));
    CHECK(r.ledger[k].call == static_cast<int>(k % 2));
    CHECK(r.ledger[k].tensor == (k % 2 ? "b" : "a"));
  }
  for (int d = 0; d < 4; ++d) CHECK(r.outputs[d].at("t")(0) == 16.0);  // 1 -> 4 -> 16
}

TEST_CASE("runtime: transport counts payload, not call signatures") {
  const Mesh mesh = Mesh::parse("2");
  Runtime rt(Backend::sim);
  std::vector<TransportStats> stats(2);
  rt.run(mesh, [&](Device& dev) {
    Group g = dev.group({"X"});
    double s[3] = {1, 2, 3}, recv[3] = {0, 0, 0};
    char sig[5] = "abcd", theirs[5] = {0};
    dev.transport().control_sendrecv(g, g.next(), sig, sizeof sig, g.prev(), theirs, sizeof theirs);
    dev.transport().sendrecv(g, g.next(), s, sizeof s, g.prev(), recv, sizeof recv);
    dev.transport().sendrecv(g, g.next(), s, sizeof(double), g.prev(), recv, sizeof(double));
    stats[static_cast<std::size_t>(dev.id())] = dev.transport().stats();
    return Outputs{};
  });
  for (const auto& s : stats) {
    CHECK(s.messages_sent == 2u);
    CHECK(s.messages_received == 2u);
    CHECK(s.bytes_sent == 4 * sizeof(double));
    CHECK(s.bytes_received == 4 * sizeof(double));
  }
}

TEST_CASE("runtime: process_is_root reads the launcher's rank variables") {
  const char* vars[] = {"PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK"};
  std::vector<std::string> saved;
  std::vector<bool> was_set;
  for (const char* v : vars) {
    const char* s = std::getenv(v);
    was_set.push_back(s != nullptr);
    saved.push_back(s ? s : "");
    unsetenv(v);
  }
  CHECK(process_is_root());
  setenv("PMI_RANK", "3", 1);
  CHECK_FALSE(process_is_root());
  setenv("PMI_RANK", "0", 1);
  CHECK(process_is_root());
  unsetenv("PMI_RANK");
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  CHECK_FALSE(process_is_root());
  unsetenv("OMPI_COMM_WORLD_RANK");
  for (std::size_t i = 0; i < 3; ++i)
    if (was_set[i]) setenv(vars[i], saved[i].c_str(), 1);
}

}  // TEST_SUITE("runtime")
