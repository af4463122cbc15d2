// harness/check/progress: the line a long run keeps on stderr, its estimate of the time left, and
// that it shows only when asked for (a terminal, or SHARDLAB_PROGRESS=always) and never under --json.
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "harness/check/progress.hpp"
#include "tests/run_binary.hpp"

using namespace shardlab;

TEST_CASE("progress line: phase, units, time spent and the time left by rate or by expectation") {
  CHECK(progress::line("bench ffn", "sharded run on 8 devices", 12.4, 21, 0, 0) ==
        "bench ffn: sharded run on 8 devices, 12 s, about 9 s left");
  // 3 of 12 files in 6 s: 9 more at 2 s each
  CHECK(progress::line("check", "case files", 6, 0, 12, 3) == "check: case files 3/12, 6 s, about 18 s left");
  CHECK(progress::line("t", "p", 30, 20, 0, 0) == "t: p, 30 s, longer than expected");
  CHECK(progress::line("t", "p", 90, 0, 0, 0) == "t: p, 1.5 min");
}

TEST_CASE("progress display: drawn in place after a phase's first second, cleared when it ends") {
  char path[] = "/tmp/shardlab_progress_XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(fd, STDERR_FILENO);
  ::setenv("SHARDLAB_PROGRESS", "terminal", 1);  // as on a terminal: silent in a phase's first second
  progress::enable("lesson", true);
  { progress::Phase quick("short phase"); }  // under a second: nothing drawn
  {
    progress::Phase p("sharded run", 30);
    std::this_thread::sleep_for(std::chrono::milliseconds(2200));  // the phase under test lasting
  }
  progress::enable("lesson", false);  // --json or --quiet: off
  { progress::Phase off("not shown"); }
  ::unsetenv("SHARDLAB_PROGRESS");
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(fd);
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  std::remove(path);
  const std::string err = text.str();
  CAPTURE(err);
  // drawn at least once (ticks come every half second; under load the figures vary)
  CHECK(std::regex_search(err, std::regex("\rlesson: sharded run, [0-9]+ s, about [0-9]+ s left\x1b\\[K")));
  CHECK(err.find("short phase") == std::string::npos);
  CHECK(err.find("not shown") == std::string::npos);
  CHECK(err.size() >= 4);
  CHECK(err.substr(err.size() - 4) == "\r\033[K");  // the line cleared at the phase's end
}

TEST_CASE("progress of a command: on stderr only when asked, never under --json, stdout unchanged") {
  // always: every phase drawn as it starts, so the test does not depend on how fast the run is
  const std::string run = "shardlab bench ffn --dims B=2,S=8,M=16,H=64 --backward";
  ::setenv("SHARDLAB_PROGRESS", "always", 1);
  const auto shown = testing::run_binary(run);
  const auto json = testing::run_binary(run + " --json");
  ::unsetenv("SHARDLAB_PROGRESS");
  const auto plain = testing::run_binary(run);  // stderr is a file here, not a terminal
  CHECK(shown.status == 0);
  for (const char* phase : {"\rbench ffn: generating inputs x, W_in, W_out, R, 0 s", "\rbench ffn: sharded run on 8 devices, 0 s",
                            "\rbench ffn: full verification against the unsharded layer, 0 s"})
    CHECK_MESSAGE(shown.err.find(phase) != std::string::npos, phase);
  CHECK(shown.err.substr(shown.err.size() - 4) == "\r\033[K");
  CHECK(shown.out.find("\033[K") == std::string::npos);
  CHECK(json.status == 0);
  CHECK(json.err.empty());
  CHECK(plain.status == 0);
  CHECK(plain.err.empty());
}
