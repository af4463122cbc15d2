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

TEST_CASE("wrap_lines, Hang::last_column: a table's or --help's last column continues under itself") {
  using shardlab::Hang;
  const std::string head = "  --mesh TEXT                 ";
  std::string words;
  for (int i = 0; i < 30; ++i) words += "word" + std::to_string(i) + " ";
  words.pop_back();
  const std::string wrapped = wrap_lines(head + words + "\nshort line\n", 60, Hang::last_column);
  std::size_t widest = 0, start = 0;
  for (std::size_t end; (end = wrapped.find('\n', start)) != std::string::npos; start = end + 1)
    widest = std::max(widest, end - start);
  CHECK(widest <= 60);
  CHECK(wrapped.rfind(head + "word0 word1", 0) == 0);
  CHECK(wrapped.find("\n" + std::string(head.size(), ' ') + "word") != std::string::npos);
  CHECK(wrapped.find("\nshort line\n") != std::string::npos);
  // A last column starting past 70% of the width: continued as prose, 4 past the indent.
  CHECK(wrap_lines("  a" + std::string(40, ' ') + "b c d e f g", 50, Hang::last_column) ==
        "  a" + std::string(40, ' ') + "b c d e\n      f g");
  const std::string unbreakable(150, 'a');
  CHECK(wrap_lines(unbreakable, 100, Hang::last_column) == unbreakable);
}
