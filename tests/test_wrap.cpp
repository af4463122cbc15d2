// core/wrap.cpp: long lines break at a space within the width, continued 4 deeper than their indent.
#include <doctest/doctest.h>

#include "core/wrap.hpp"

using shardlab::wrap_lines;

TEST_CASE("wrap_lines: short lines stay, long ones break at a space, continued deeper") {
  CHECK(wrap_lines("short\n  also short\n", 20) == "short\n  also short\n");
  CHECK(wrap_lines("  one two three four five", 14) == "  one two\n      three\n      four\n      five");
  CHECK(wrap_lines("aaaaaaaaaaaaaaaaaaaa b", 10) == "aaaaaaaaaaaaaaaaaaaa\n    b");
  CHECK(wrap_lines("", 10).empty());
  for (std::size_t w : {30u, 60u, 100u}) {
    const std::string long_line = "   check: PASS max_abs_err=1.5e-07 (worst err/tol 0.01, tol per element up to 3e-05); 6 of 512";
    const std::string got = wrap_lines(long_line, w);
    std::size_t start = 0;
    while (start <= got.size()) {
      const std::size_t end = std::min(got.find('\n', start), got.size());
      CHECK(end - start <= w);
      start = end + 1;
    }
  }
}
