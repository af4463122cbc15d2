// collectives/sim.cpp (+ the signature check in call.cpp): the threaded sim backend never hangs.
// Mismatched collectives, skipped collectives, cyclic waits and exceptions on one device all make
// Runtime::run return by throwing shardlab::Error naming what went wrong.
// Over 400 lines (507) as one idea: one property of the sim backend, that it never hangs.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "collectives/collectives.hpp"
#include "collectives/runtime.hpp"
#include "collectives/sim.hpp"
#include "core/error.hpp"
#include "core/mesh.hpp"

using namespace shardlab;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Device d's block: every element d + 1.
Tensor block(int d, const Shape& shape) {
  Tensor t = xt::zeros<double>(shape);
  t.fill(d + 1);
  return t;
}

// Runs `program` on `mesh`; it must throw shardlab::Error of `kind`. Returns the message.
std::string run_error(const Mesh& mesh, const SpmdProgram& program, ErrorKind kind) {
  Runtime rt(Backend::sim);
  try {
    rt.run(mesh, program);
  } catch (const Error& e) {
    CHECK(e.kind() == kind);
    return e.what();
  } catch (...) {
    FAIL("run threw something other than shardlab::Error");
    return "";
  }
  FAIL("run returned normally");
  return "";
}

}  // namespace

TEST_SUITE("sim") {

TEST_CASE("sim: two devices of one group call different collectives") {
  const Mesh mesh = Mesh::parse("2x4");
  const std::string msg = run_error(
      mesh,
      [](Device& dev) {
        const Tensor t = block(dev.id(), {2, 3});
        if (dev.id() == 1) return Outputs{{"o", all_reduce(dev, t, {"Y"}, "A")}};
        return Outputs{{"o", all_gather(dev, t, {"Y"}, 0, "A")}};
      },
      ErrorKind::mismatch);
  CHECK(has(msg, "do not match"));
  CHECK(has(msg, "all_reduce over Y of A[2, 3]"));
  CHECK(has(msg, "all_gather over Y of A[2, 3] along dim 0"));
  CHECK(has(msg, "device 1"));
}

TEST_CASE("sim: reduce_scatter against all_gather along another dim") {
  const Mesh mesh = Mesh::parse("8");
  const std::string msg = run_error(
      mesh,
      [](Device& dev) {
        const Tensor t = block(dev.id(), {8, 8});
        if (dev.id() == 6) return Outputs{{"o", all_gather(dev, t, {"X"}, 1, "W")}};
        return Outputs{{"o", reduce_scatter(dev, t, {"X"}, 0, "W")}};
      },
      ErrorKind::mismatch);
  CHECK(has(msg, "all_gather over X of W[8, 8] along dim 1"));
  CHECK(has(msg, "reduce_scatter over X of W[8, 8] along dim 0"));
}

TEST_CASE("sim: mismatched collectives whose messages happen to have equal sizes") {
  // all_gather of [2] and reduce_scatter of [4] on a group of 2 both send and receive one message
  // of 2 doubles: only the call signatures tell them apart, so the data must never be exchanged.
  const Mesh mesh = Mesh::parse("2");
  const std::string msg = run_error(
      mesh,
      [](Device& dev) {
        if (dev.id() == 0) return Outputs{{"o", all_gather(dev, block(0, {2}), {"X"}, 0, "A")}};
        return Outputs{{"o", reduce_scatter(dev, block(1, {4}), {"X"}, 0, "A")}};
      },
      ErrorKind::mismatch);
  CHECK(has(msg, "collectives do not match: device "));
  CHECK(has(msg, "all_gather over X of A[2] along dim 0"));
  CHECK(has(msg, "reduce_scatter over X of A[4] along dim 0"));
}

TEST_CASE("sim: devices of one group pass different shapes") {
  const Mesh mesh = Mesh::parse("8");
  const std::string msg = run_error(
      mesh,
      [](Device& dev) {
        const Tensor t = block(dev.id(), dev.id() == 3 ? Shape{2, 4} : Shape{2, 3});
        return Outputs{{"o", all_gather(dev, t, {"X"}, 0, "A")}};
      },
      ErrorKind::mismatch);
  CHECK(has(msg, "A[2, 4]"));
  CHECK(has(msg, "A[2, 3]"));
}

TEST_CASE("sim: devices of one group name different axes") {
  const Mesh mesh = Mesh::parse("2x4");
  const std::string msg = run_error(
      mesh,
      [](Device& dev) {
        const Tensor t = block(dev.id(), {4});
        if (dev.id() == 0) return Outputs{{"o", all_reduce(dev, t, {"X", "Y"}, "A")}};
        return Outputs{{"o", all_reduce(dev, t, {"Y"}, "A")}};
      },
      ErrorKind::mismatch);
  CAPTURE(msg);
  CHECK(has(msg, "all_reduce over X,Y of A[4]"));
  CHECK(has(msg, "all_reduce over Y of A[4]"));
}

TEST_CASE("sim: one device skips a collective") {
  const Mesh mesh = Mesh::parse("8");
  const std::string msg = run_error(
      mesh,
      [](Device& dev) {
        if (dev.id() == 5) return Outputs{};
        return Outputs{{"o", all_reduce(dev, block(dev.id(), {8}), {"X"}, "A")}};
      },
      ErrorKind::mismatch);
  // Device 6 receives from its ring neighbour 5, which has finished.
  CHECK(msg == "device 6 waits in all_reduce over X of A[8] for device 5, which finished its program without "
               "taking part");
}

TEST_CASE("sim: one device skips the first of two collectives") {
  const Mesh mesh = Mesh::parse("2x2");
  const std::string msg = run_error(
      mesh,
      [](Device& dev) {
        Tensor t = block(dev.id(), {4});
        if (dev.id() != 2) t = all_gather(dev, t, {"X", "Y"}, 0, "A");
        return Outputs{{"o", all_reduce(dev, t, {"X", "Y"}, "B")}};
      },
      ErrorKind::mismatch);
  CHECK(has(msg, "all_gather over X,Y of A[4] along dim 0"));
  CHECK(has(msg, "all_reduce over X,Y of B[4]"));
}

TEST_CASE("sim: devices wait on different groups in a cycle") {
  // 2x2 mesh, device = 2x + y. Devices 0 and 3 call over X, devices 1 and 2 over Y:
  //   0 waits on 2 (its X partner), 2 on 3 (Y), 3 on 1 (X), 1 on 0 (Y): a cycle, every mailbox empty.
  const Mesh mesh = Mesh::parse("2x2");
  const std::string msg = run_error(
      mesh,
      [](Device& dev) {
        const std::vector<std::string> axes = (dev.id() == 0 || dev.id() == 3) ? std::vector<std::string>{"X"}
                                                                                : std::vector<std::string>{"Y"};
        return Outputs{{"o", all_reduce(dev, block(dev.id(), {2}), axes, "A")}};
      },
      ErrorKind::mismatch);
  CHECK(has(msg, "every device is stuck"));
  CHECK(has(msg, "device 0 in all_reduce over X of A[2] waits for device 2"));
  CHECK(has(msg, "device 1 in all_reduce over Y of A[2] waits for device 0"));
  CHECK(has(msg, "device 2 in all_reduce over Y of A[2] waits for device 3"));
  CHECK(has(msg, "device 3 in all_reduce over X of A[2] waits for device 1"));
}

TEST_CASE("sim: one group waits for devices that run another group's collective, then finish") {
  // Row x=0 reduces over Y, row x=1 over X: the X groups {y, 4+y} never complete.
  const Mesh mesh = Mesh::parse("2x4");
  const std::string msg = run_error(
      mesh,
      [](Device& dev) {
        const std::vector<std::string> axes = dev.id() < 4 ? std::vector<std::string>{"Y"} : std::vector<std::string>{"X"};
        return Outputs{{"o", all_reduce(dev, block(dev.id(), {4}), axes, "A")}};
      },
      ErrorKind::mismatch);
  // Row 0 completes and finishes; device 4 is the first left waiting (on its X partner, device 0).
  CHECK(msg == "device 4 waits in all_reduce over X of A[4] for device 0, which finished its program without "
               "taking part");
}

TEST_CASE("sim: independent groups may run their collectives in different orders") {
  // Sends are buffered per (sender, receiver) pair, so row 0 doing Y then X while row 1 does X then
  // Y is not a deadlock; the results are as if all had used one order.
  const Mesh mesh = Mesh::parse("2x4");
  Runtime rt(Backend::sim);
  RunResult r = rt.run(mesh, [](Device& dev) {
    const Tensor t = block(dev.id(), {2});  // value d+1
    Tensor a, b;
    if (dev.id() < 4) {
      a = all_reduce(dev, t, {"Y"}, "row");
      b = all_reduce(dev, t, {"X"}, "col");
    } else {
      b = all_reduce(dev, t, {"X"}, "col");
      a = all_reduce(dev, t, {"Y"}, "row");
    }
    return Outputs{{"row", a}, {"col", b}};
  });
  for (int d = 0; d < 8; ++d) {
    const int x = d / 4, y = d % 4;
    // row sum: devices 4x..4x+3 hold 4x+1..4x+4 -> 16x + 10; column sum: y+1 + y+5 = 2y + 6
    CHECK(r.outputs[d].at("row")(0) == 16.0 * x + 10);
    CHECK(r.outputs[d].at("col")(1) == 2.0 * y + 6);
  }
}

TEST_CASE("sim: an exception on one device stops the run with that device's message") {
  const Mesh mesh = Mesh::parse("8");
  const std::string msg = run_error(
      mesh,
      [](Device& dev) {
        if (dev.id() == 3) throw std::runtime_error("boom on three");
        return Outputs{{"o", all_reduce(dev, block(dev.id(), {8}), {"X"}, "A")}};
      },
      ErrorKind::device);
  CHECK(msg == "device 3 failed: boom on three");
}

TEST_CASE("sim: an exception after a collective, while the others wait in the next one") {
  const Mesh mesh = Mesh::parse("2x4");
  const std::string msg = run_error(
      mesh,
      [](Device& dev) {
        Tensor t = all_gather(dev, block(dev.id(), {2}), {"Y"}, 0, "A");
        if (dev.id() == 6) throw std::logic_error("bad block on six");
        return Outputs{{"o", all_reduce(dev, t, {"X", "Y"}, "B")}};
      },
      ErrorKind::device);
  CHECK(msg == "device 6 failed: bad block on six");
}

TEST_CASE("sim: a shardlab::Error on one device keeps its kind and message") {
  const Mesh mesh = Mesh::parse("2x2");
  const std::string msg = run_error(
      mesh,
      [](Device& dev) {
        if (dev.id() == 2) throw Error(ErrorKind::unsupported, "device 2 cannot do this");
        return Outputs{{"o", all_reduce(dev, block(dev.id(), {4}), {"X"}, "A")}};
      },
      ErrorKind::unsupported);
  CHECK(msg == "device 2 cannot do this");
}

TEST_CASE("sim: a non-standard exception is reported as a device failure") {
  const Mesh mesh = Mesh::parse("4");
  const std::string msg = run_error(
      mesh,
      [](Device& dev) {
        if (dev.id() == 1) throw 42;
        return Outputs{{"o", all_reduce(dev, block(dev.id(), {4}), {"X"}, "A")}};
      },
      ErrorKind::device);
  CHECK(msg == "device 1 failed with an unknown exception");
}

TEST_CASE("sim: every device failing reports one of them") {
  const Mesh mesh = Mesh::parse("8");
  const std::string msg = run_error(
      mesh, [](Device& dev) -> Outputs { throw std::runtime_error("fail " + std::to_string(dev.id())); },
      ErrorKind::device);
  CHECK(has(msg, "failed: fail "));
}

TEST_CASE("sim: a runtime works again after a failed run") {
  const Mesh mesh = Mesh::parse("2x2");
  Runtime rt(Backend::sim);
  CHECK_THROWS_AS(rt.run(mesh,
                         [](Device& dev) {
                           if (dev.id() == 0) return Outputs{};
                           return Outputs{{"o", all_reduce(dev, block(dev.id(), {2}), {"X", "Y"}, "A")}};
                         }),
                  Error);
  RunResult r = rt.run(mesh, [](Device& dev) {
    return Outputs{{"o", all_reduce(dev, block(dev.id(), {2}), {"X", "Y"}, "A")}};
  });
  REQUIRE(r.outputs.size() == 4u);
  for (int d = 0; d < 4; ++d) CHECK(r.outputs[d].at("o")(0) == 10.0);  // 1+2+3+4
  CHECK(r.ledger.size() == 4u);
}

TEST_CASE("sim: 64 devices on an 8x8 mesh, and a mismatch among them") {
  const Mesh mesh = Mesh::parse("8x8");
  Runtime rt(Backend::sim);
  RunResult r = rt.run(mesh, [](Device& dev) {
    return Outputs{{"o", all_reduce(dev, block(dev.id(), {64}), {"X", "Y"}, "A")}};
  });
  for (int d = 0; d < 64; ++d) CHECK(r.outputs[d].at("o")(63) == 64.0 * 65 / 2);
  const std::string msg = run_error(
      mesh,
      [](Device& dev) {
        const Tensor t = block(dev.id(), {64});
        if (dev.id() == 37) return Outputs{{"o", all_gather(dev, t, {"X", "Y"}, 0, "A")}};
        return Outputs{{"o", all_reduce(dev, t, {"X", "Y"}, "A")}};
      },
      ErrorKind::mismatch);
  CHECK(has(msg, "all_gather over X,Y of A[64]"));
}

TEST_CASE("sim world: a message of the wrong size is a mismatch naming both activities") {
  SimWorld w(2);
  const double x[1] = {1.0};
  w.post(0, 1, Channel::data, x, sizeof x, "all_gather of A");
  w.set_activity(1, "all_reduce of B");
  double y[2];
  CHECK_THROWS_AS(w.take(1, 0, Channel::data, y, sizeof y), Aborted);
  REQUIRE(w.first_error());
  try {
    std::rethrow_exception(w.first_error());
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::mismatch);
    CHECK(std::string(e.what()) ==
          "collectives do not match: device 1 is in all_reduce of B and expected 16 bytes from device 0, which is in "
          "all_gather of A and sent 8 bytes");
  }
  // after an abort, posting and taking stop too
  CHECK_THROWS_AS(w.post(0, 1, Channel::data, x, sizeof x, "x"), Aborted);
  CHECK_THROWS_AS(w.take(0, 1, Channel::data, y, sizeof x), Aborted);
}

TEST_CASE("sim world: a control message where data was expected is a mismatch") {
  SimWorld w(2);
  const double x[1] = {1.0};
  w.post(0, 1, Channel::control, x, sizeof x, "a");
  double y[1];
  CHECK_THROWS_AS(w.take(1, 0, Channel::data, y, sizeof y), Aborted);
  REQUIRE(w.first_error());
  CHECK_THROWS_AS(std::rethrow_exception(w.first_error()), Error);
}

TEST_CASE("sim world: a lent message is read from the sender's buffer, copied or added, then receipted") {
  SimWorld w(2);
  double x[3] = {1.5, -2.0, 4.0};
  Receipt r;
  w.post(0, 1, Channel::data, x, sizeof x, "s", &r);
  x[2] = 8.0;  // lent, not copied: the receiver sees the buffer as it is when it reads
  CHECK(r.state.load() == 0);
  double y[3] = {0, 0, 0};
  w.take(1, 0, Channel::data, y, sizeof y);
  CHECK(y[0] == 1.5);
  CHECK(y[1] == -2.0);
  CHECK(y[2] == 8.0);
  CHECK(r.state.load() == 2);
  w.await_receipt(0, 1, r);  // returns at once

  Receipt r2;
  const double base[3] = {10.0, 20.0, 30.0};
  double sum[3] = {0, 0, 0};
  w.post(0, 1, Channel::data, x, sizeof x, "s", &r2);
  w.take(1, 0, Channel::data, sizeof x, Delivery{sum, base, DType::float64, true});
  CHECK(sum[0] == 11.5);
  CHECK(sum[1] == 18.0);
  CHECK(sum[2] == 38.0);
  CHECK(base[0] == 10.0);
  w.await_receipt(0, 1, r2);
  CHECK_FALSE(w.first_error());
}

TEST_CASE("sim world: a data message posted in another call is refused before its bytes move") {
  SimWorld w(2);
  const double x[1] = {7.0};
  w.post(0, 1, Channel::data, x, sizeof x, "all_gather over X of A[1] along dim 0");
  double y[1] = {0.0};
  const std::string mine = "reduce_scatter over X of A[2] along dim 0";
  Delivery d{y};
  d.activity = &mine;
  CHECK_THROWS_AS(w.take(1, 0, Channel::data, sizeof y, d), Aborted);
  CHECK(y[0] == 0.0);
  try {
    std::rethrow_exception(w.first_error());
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::mismatch);
    CHECK(std::string(e.what()) == "collectives do not match: device 1 calls reduce_scatter over X of A[2] along dim 0, "
                                   "device 0 calls all_gather over X of A[1] along dim 0");
  }
}

TEST_CASE("sim world: a lent message of the wrong size aborts, and its sender's wait ends") {
  SimWorld w(2);
  const double x[2] = {1.0, 2.0};
  Receipt r;
  w.post(0, 1, Channel::data, x, sizeof x, "all_gather of A", &r);
  double y[1];
  CHECK_THROWS_AS(w.take(1, 0, Channel::data, y, sizeof y), Aborted);
  CHECK(r.state.load() == 0);  // never read
  CHECK_THROWS_AS(w.await_receipt(0, 1, r), Aborted);
  REQUIRE(w.first_error());
  CHECK_THROWS_AS(std::rethrow_exception(w.first_error()), Error);
}

TEST_CASE("sim world: settle withdraws a lent message nobody took") {
  SimWorld w(2);
  const double x[1] = {1.0}, later[1] = {2.0};
  Receipt r;
  w.post(0, 1, Channel::data, x, sizeof x, "a", &r);
  w.settle(0, 1, r);  // the sender unwinds before anyone read it
  w.post(0, 1, Channel::data, later, sizeof later, "a");
  double y[1] = {0.0};
  w.take(1, 0, Channel::data, y, sizeof y);
  CHECK(y[0] == 2.0);  // the withdrawn message is gone
  CHECK(r.state.load() == 0);
}

TEST_CASE("sim world: waiting for a receipt from a device that finished does not block") {
  SimWorld w(2);
  const double x[1] = {1.0};
  Receipt r;
  w.set_activity(0, "all_reduce of B");
  w.post(0, 1, Channel::data, x, sizeof x, "all_reduce of B", &r);
  w.finish(1);
  CHECK_THROWS_AS(w.await_receipt(0, 1, r), Aborted);
  try {
    std::rethrow_exception(w.first_error());
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::mismatch);
    CHECK(std::string(e.what()) ==
          "device 0 waits in all_reduce of B for device 1, which finished its program without taking part");
  }
}

TEST_CASE("sim world: two devices waiting for each other's receipts are reported stuck") {
  // Each lends a message to the other and waits for the receipt without taking: no one can move.
  SimWorld w(2);
  const double x[1] = {1.0};
  Receipt r0, r1;
  w.post(0, 1, Channel::data, x, sizeof x, "a", &r0);
  w.post(1, 0, Channel::data, x, sizeof x, "b", &r1);
  std::string second;
  std::thread t([&] {
    try {
      w.await_receipt(1, 0, r1);
    } catch (const Aborted&) {
      second = "aborted";
    }
  });
  CHECK_THROWS_AS(w.await_receipt(0, 1, r0), Aborted);
  t.join();
  CHECK(second == "aborted");
  try {
    std::rethrow_exception(w.first_error());
  } catch (const Error& e) {
    CHECK(has(e.what(), "every device is stuck"));
    CHECK(has(e.what(), "to take its message"));
  }
}

TEST_CASE("sim world: messages between one pair arrive in order, with their bytes") {
  SimWorld w(3);
  const double a[2] = {1.5, -2.0}, b[2] = {7.0, 8.0};
  w.post(2, 0, Channel::data, a, sizeof a, "s");
  w.post(2, 0, Channel::data, b, sizeof b, "s");
  w.post(1, 0, Channel::data, b, sizeof b, "s");
  double r[2];
  w.take(0, 2, Channel::data, r, sizeof r);
  CHECK(r[0] == 1.5);
  CHECK(r[1] == -2.0);
  w.take(0, 1, Channel::data, r, sizeof r);
  CHECK(r[0] == 7.0);
  w.take(0, 2, Channel::data, r, sizeof r);
  CHECK(r[1] == 8.0);
  CHECK_FALSE(w.first_error());
}

TEST_CASE("sim world: waiting on a finished device, or when nobody can send, does not block") {
  {
    SimWorld w(2);
    w.finish(0);
    w.set_activity(1, "all_gather of A");
    double y[1];
    CHECK_THROWS_AS(w.take(1, 0, Channel::data, y, sizeof y), Aborted);
    try {
      std::rethrow_exception(w.first_error());
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::mismatch);
      CHECK(std::string(e.what()) ==
            "device 1 waits in all_gather of A for device 0, which finished its program without taking part");
    }
  }
  {
    SimWorld w(1);  // the only live device waits on an empty mailbox: stuck
    double y[1];
    CHECK_THROWS_AS(w.take(0, 0, Channel::data, y, sizeof y), Aborted);
    try {
      std::rethrow_exception(w.first_error());
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::mismatch);
      CHECK(has(e.what(), "every device is stuck: device 0 in startup waits for device 0"));
    }
  }
}

TEST_CASE("sim world: the first failure is the one kept") {
  SimWorld w(3);
  w.fail(2, std::make_exception_ptr(std::runtime_error("first")));
  w.fail(0, std::make_exception_ptr(std::runtime_error("second")));
  try {
    std::rethrow_exception(w.first_error());
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::device);
    CHECK(std::string(e.what()) == "device 2 failed: first");
  }
}

}  // TEST_SUITE("sim")
