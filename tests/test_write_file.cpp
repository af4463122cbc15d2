// core/write_file.cpp: a target that cannot be replaced is refused before the run, whoever runs it
// (root's access() ignores mode bits), and is left as it was; and the commands that write reports
// (--trace, --junit, --out, --csv, a sweep's .dat) refuse it up front with exit 2.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.hpp"
#include "core/write_file.hpp"
#include "tests/run_binary.hpp"

using shardlab::Error;
using shardlab::ErrorKind;
using shardlab::check_writable;
using shardlab::write_file_whole;
using shardlab::testing::count_lines;
using shardlab::testing::run_binary;
using shardlab::testing::run_line;

namespace {

std::string scratch_dir() {
  static const std::string dir = [] {
    const std::string d = "/tmp/shardlab_write_file_" + std::to_string(::getpid());
    ::mkdir(d.c_str(), 0755);
    return d;
  }();
  return dir;
}

std::string contents(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void put(const std::string& path, const std::string& text, mode_t mode) {
  ::chmod(path.c_str(), 0644);
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
}

// chattr +i where the file system and the user allow it (root on ext4); false otherwise.
bool make_immutable(const std::string& path) { return run_line("chattr +i " + path + " >/dev/null 2>&1").status == 0; }
void undo_immutable(const std::string& path) { run_line("chattr -i " + path + " >/dev/null 2>&1"); }

}  // namespace

TEST_CASE("check_writable: a read-only target is refused and kept, for root as for anyone") {
  const std::string path = scratch_dir() + "/readonly.json";
  put(path, "keep me\n", 0444);
  CHECK_THROWS_WITH_AS(check_writable(path, "trace"), doctest::Contains("read-only"), Error);
  CHECK_THROWS_AS(write_file_whole(path, "trace", [](std::ostream& o) { o << "new"; }), Error);
  CHECK(contents(path) == "keep me\n");
  // A writable one is replaced whole.
  put(path, "old\n", 0644);
  write_file_whole(path, "trace", [](std::ostream& o) { o << "new\n"; });
  CHECK(contents(path) == "new\n");
  std::remove(path.c_str());
}

TEST_CASE("check_writable: an immutable target (chattr +i) is refused before any work") {
  const std::string path = scratch_dir() + "/immutable.json";
  put(path, "keep me\n", 0644);
  if (!make_immutable(path)) {
    MESSAGE("chattr +i is not available here: skipped");
    std::remove(path.c_str());
    return;
  }
  CHECK_THROWS_WITH_AS(check_writable(path, "trace"), doctest::Contains("immutable"), Error);
  undo_immutable(path);
  std::remove(path.c_str());
}

TEST_CASE("commands refuse an unwritable report target before they run: exit 2, one line, file kept") {
  const std::string d = scratch_dir();
  const std::string ro = d + "/r.json", imm = d + "/i.dat";
  put(ro, "keep me\n", 0444);
  ::mkdir((d + "/sweep").c_str(), 0755);
  const std::string dat = d + "/sweep/zero_memory.dat";
  put(dat, "keep me\n", 0644);
  const bool immutable = make_immutable(dat);
  struct Case {
    std::string line;
    std::string target;
  };
  std::vector<Case> cases = {
      {"shardlab moe --trace " + ro, ro},
      {"shardlab check harness/cases/column_ffn.toml --junit " + ro, ro},
      {"shardlab matmul --a-spec X,_ --b-spec _,_ --mesh X=2 --shape 4,4,4 --out " + ro, ro},
      {"shardlab bench collectives --min 8 --max 64 --iters 1 --csv " + ro, ro},
      {"02_reduction_allreduce --trace " + ro, ro},
  };
  if (immutable) cases.push_back({"shardlab sweep --what zero,bytes --out " + d + "/sweep", dat});
  for (const Case& c : cases) {
    CAPTURE(c.line);
    const auto r = run_binary(c.line);
    CHECK(r.status == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.out.empty());
    CHECK(contents(c.target) == "keep me\n");
  }
  CHECK(::access((d + "/sweep/bytes_per_device.dat").c_str(), F_OK) != 0);  // nothing written beside it
  if (immutable) undo_immutable(dat);
  run_line("rm -rf " + d);
}
