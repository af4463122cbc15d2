// bench/peer.py (make bench-peer): its own logic, not its timings. The parsing it reads shardlab's
// and /usr/bin/time's output with passes its self-test (which plants bad --dims and checks they are
// refused); without PyTorch it says so in one line and exits 0; bad input exits 2 with one line.
#include <doctest/doctest.h>

#include <string>

#include "tests/run_binary.hpp"

using shardlab::testing::run_line;

namespace {

bool has_python() { return run_line("test -x /usr/bin/python3").status == 0; }

}  // namespace

TEST_CASE("bench peer: self-test, the skip line without PyTorch, bad dims refused") {
  if (!has_python()) {
    MESSAGE("no /usr/bin/python3: bench/peer.py not run");
    return;
  }
  const auto self = run_line("/usr/bin/python3 bench/peer.py --self-test");
  CHECK(self.status == 0);
  CHECK(self.out.find("12 checks passed") != std::string::npos);
  // -S leaves out the site directories, where Debian's python3-torch is: PyTorch cannot be imported.
  const auto skip = run_line("/usr/bin/python3 bench/peer.py --python '/usr/bin/python3 -S'");
  CHECK(skip.status == 0);
  CHECK(skip.out.rfind("bench peer: skipped: PyTorch is not importable", 0) == 0);
  CHECK(skip.out.find('\n') == skip.out.size() - 1);  // one line
  const auto bad = run_line("/usr/bin/python3 bench/peer.py --dims B=8,S=512,M=1024,H=4095");
  CHECK(bad.status == 2);
  CHECK(bad.err.find("H must be even") != std::string::npos);
  CHECK(bad.out.empty());
}
