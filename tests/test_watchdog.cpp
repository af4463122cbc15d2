// collectives/watchdog.cpp and its uses: a device that never arrives at a collective (or never
// sends what another waits for) stops a sim run after --collective-timeout with
// Error(ErrorKind::fault) naming the missing device and what the waiting one was in; binaries
// exit 3 on it, refuse a timeout that is not a positive number (exit 2, one sentence), and exit
// 130 / 143 on SIGINT / SIGTERM.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <utility>
#include <chrono>
#include <string>
#include <thread>

#include "collectives/collectives.hpp"
#include "collectives/runtime.hpp"
#include "collectives/watchdog.hpp"
#include "core/error.hpp"
#include "harness/cli/cli.hpp"
#include "tests/run_binary.hpp"

using namespace shardlab;
using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Sets the process-wide timeout for one test and puts the default back after it.
struct TimeoutFor {
  explicit TimeoutFor(double seconds) { set_collective_timeout(seconds); }
  ~TimeoutFor() { set_collective_timeout(kDefaultCollectiveTimeout); }
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

Tensor ones(const Shape& shape) {
  Tensor t = xt::zeros<double>(shape);
  t.fill(1);
  return t;
}

// Runs `program` on `mesh`; it must throw Error(fault). Returns the message.
std::string fault(const std::string& mesh, const SpmdProgram& program) {
  Runtime rt(Backend::sim);
  try {
    rt.run(Mesh::parse(mesh), program);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::fault);
    return e.what();
  }
  FAIL("run returned normally");
  return "";
}

}  // namespace

TEST_SUITE("watchdog") {

TEST_CASE("watchdog: the timeout must be a positive number of seconds") {
  CHECK(collective_timeout() == kDefaultCollectiveTimeout);
  CHECK_THROWS_AS(set_collective_timeout(0), Error);
  CHECK_THROWS_AS(set_collective_timeout(-1), Error);
  CHECK(collective_timeout() == kDefaultCollectiveTimeout);
  {
    TimeoutFor t(0.5);
    CHECK(collective_timeout() == 0.5);
    const Deadline d;
    CHECK_FALSE(d.passed());
  }
  CHECK(collective_timeout() == kDefaultCollectiveTimeout);
  CHECK(seconds_text(2) == "2 s");
  CHECK(seconds_text(0.25) == "0.25 s");
}

TEST_CASE("watchdog: a device that arrives late at an all_reduce stops the run as a fault naming it") {
  TimeoutFor t(0.3);
  const auto start = std::chrono::steady_clock::now();
  const std::string msg = fault("X=4", [](Device& dev) {
    if (dev.id() == 2) std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // "compute"
    return Outputs{{"o", all_reduce(dev, ones({8}), {"X"}, "h")}};
  });
  const double took = seconds_since(start);
  MESSAGE(msg);
  CHECK(has(msg, "collective timeout (--collective-timeout 0.3 s)"));
  CHECK(has(msg, "device 2 has not arrived (it is in startup)"));
  CHECK(has(msg, " in all_reduce"));  // what the waiting device was doing
  CHECK(has(msg, "of h"));
  CHECK(took < 5);  // the late device finishes its sleep, meets the abort and ends; nothing hangs
}

TEST_CASE("watchdog: a device stuck for good is left behind; the run returns the fault") {
  TimeoutFor t(0.3);
  static std::atomic<bool> release{false};
  release = false;
  const auto start = std::chrono::steady_clock::now();
  const std::string msg = fault("X=2", [](Device& dev) {
    Tensor x = all_reduce(dev, ones({4}), {"X"}, "a");
    // Device 1 never arrives (within 20 s: without a watchdog this test fails instead of hanging).
    const auto stuck = std::chrono::steady_clock::now();
    if (dev.id() == 1)
      while (!release && seconds_since(stuck) < 20) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return Outputs{{"o", all_gather(dev, x, {"X"}, 0, "b")}};
  });
  const double took = seconds_since(start);
  release = true;  // let the detached device thread end
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  MESSAGE(msg);
  CHECK(has(msg, "device 0 waited"));
  CHECK(has(msg, "in all_gather"));
  CHECK(has(msg, "device 1 has not arrived (it is in local work after all_reduce of a)"));
  CHECK(took < 3);  // 0.3 s timeout + at most 1 s for the stuck device, then it is left behind
}

TEST_CASE("watchdog: a receive from a device that never sends times out too") {
  TimeoutFor t(0.2);
  const std::string msg = fault("X=2", [](Device& dev) {
    if (dev.id() == 0) return Outputs{{"o", recv(dev, 1, {4}, "act")}};
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    send(dev, ones({4}), 0, "act");
    return Outputs{};
  });
  CHECK(has(msg, "device 0 waited"));
  CHECK(has(msg, "recv of act"));
  CHECK(has(msg, "device 1 has not arrived"));
}

TEST_CASE("watchdog: a run that finishes in time is untouched by a short timeout") {
  // Short beside the default 300 s, long beside the run: on a loaded machine starting four threads
  // alone has taken a good part of a second.
  TimeoutFor t(5);
  Runtime rt(Backend::sim);
  const RunResult r = rt.run(Mesh::parse("2x2"), [](Device& dev) {
    return Outputs{{"o", all_reduce(dev, ones({4}), {"X", "Y"}, "h")}};
  });
  CHECK(r.outputs.at(3).at("o")(0) == 4);
}

TEST_CASE("watchdog: guarded() turns a fault into exit 3 and leaves the other kinds at 2") {
  CHECK(guarded([]() -> int { throw Error(ErrorKind::fault, "a device did not arrive"); }) == 3);
  CHECK(guarded([]() -> int { throw Error(ErrorKind::parse, "bad flag"); }) == 2);
  CHECK(guarded([]() -> int { throw Error(ErrorKind::mismatch, "collectives do not match"); }) == 2);
  CHECK(guarded([]() -> int { throw std::runtime_error("boom"); }) == 2);
  CHECK(guarded([] { return 1; }) == 1);
}

TEST_CASE("watchdog: --collective-timeout that is not a positive number: exit 2, one sentence") {
  for (const std::string bad : {"0", "-1", "abc", "''", "1e999", "nan"}) {
    CAPTURE(bad);
    auto r = run_binary("02_reduction_allreduce --collective-timeout " + bad);
    CHECK(r.status == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(has(r.err, "give a positive number of seconds"));
    CHECK(r.out.empty());
    auto s = run_binary("shardlab bench collectives --max 1K --collective-timeout " + bad);
    CHECK(s.status == 2);
    CHECK(count_lines(s.err) == 1);
    CHECK(has(s.err, "give a positive number of seconds"));
  }
}

TEST_CASE("watchdog: every binary and device-running command takes --collective-timeout") {
  auto lesson = run_binary("02_reduction_allreduce --collective-timeout 2.5 --quiet");
  CHECK(lesson.status == 0);
  CHECK(has(run_binary("16_pipeline --help").out, "--collective-timeout"));
  for (const std::string cmd : {"run", "check", "ffn", "matmul", "einsum", "pipeline", "sweep", "bench collectives",
                                "bench memory", "bench ffn"}) {
    CAPTURE(cmd);
    CHECK(has(run_binary("shardlab " + cmd + " --help").out, "--collective-timeout"));
  }
}

TEST_CASE("watchdog: SIGINT exits 130 and SIGTERM 143") {
  // A sim run of several seconds (a 64 MiB sweep), signalled after half a second.
  for (const auto& [sig, want] : {std::pair<std::string, int>{"INT", 130}, {"TERM", 143}}) {
    CAPTURE(sig);
    const std::string run = shardlab::testing::bin_dir() +
                            "/shardlab bench collectives --backend sim --min 64M --max 64M --iters 50 >/dev/null 2>&1";
    const std::string script = run + " & pid=$!; sleep 0.5; kill -" + sig + " $pid; wait $pid";
    const int raw = std::system(("timeout 60 bash -c '" + script + "'").c_str());
    CHECK(WIFEXITED(raw));
    CHECK(WEXITSTATUS(raw) == want);
  }
}

}  // TEST_SUITE
