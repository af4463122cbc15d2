// core/text.cpp: split, split_top, trim, join, parse_positive, is_identifier, format_number,
// read_text_file.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "core/error.hpp"
#include "core/text.hpp"

using namespace shardlab;
using Strings = std::vector<std::string>;

TEST_CASE("split keeps empty parts") {
  CHECK(split("a,b,c", ',') == Strings{"a", "b", "c"});
  CHECK(split("", ',') == Strings{""});
  CHECK(split("a,,b", ',') == Strings{"a", "", "b"});
  CHECK(split(",a,", ',') == Strings{"", "a", ""});
  CHECK(split("2x4x8", 'x') == Strings{"2", "4", "8"});
  CHECK(split("(X,Y),_", ',') == Strings{"(X", "Y)", "_"});  // split ignores parentheses
}

TEST_CASE("split_top splits only at parenthesis depth 0") {
  CHECK(split_top("(X,Y),_", ',') == Strings{"(X,Y)", "_"});
  CHECK(split_top("X,_,Y", ',') == Strings{"X", "_", "Y"});
  CHECK(split_top("_,(X,Y,Z)", ',') == Strings{"_", "(X,Y,Z)"});
  CHECK(split_top("", ',') == Strings{""});
  CHECK(split_top("(A,B),(C,D)", ',') == Strings{"(A,B)", "(C,D)"});
}

TEST_CASE("trim removes surrounding whitespace only") {
  CHECK(trim("  X=2 \t\n") == "X=2");
  CHECK(trim("a b") == "a b");
  CHECK(trim("   ") == "");
  CHECK(trim("") == "");
  CHECK(trim("x") == "x");
}

TEST_CASE("join is the inverse of split") {
  CHECK(join({"X", "Y"}, ",") == "X,Y");
  CHECK(join({}, ",") == "");
  CHECK(join({"a"}, ", ") == "a");
  CHECK(join({"a", "", "b"}, "-") == "a--b");
  CHECK(join(split("a,,b,", ','), ",") == "a,,b,");
}

TEST_CASE("parse_positive accepts whole positive integers") {
  CHECK(parse_positive("1", "n") == 1);
  CHECK(parse_positive("42", "n") == 42);
  CHECK(parse_positive("999999999", "n") == 999999999L);
}

TEST_CASE("parse_positive rejects everything else with a parse error naming the input") {
  for (const std::string bad : {"0", "-1", "", "+3", " 3", "3 ", "1.5", "q", "2x", "1e3", "1234567890", "007", "0x4"}) {
    CAPTURE(bad);
    try {
      parse_positive(bad, "mesh axis X");
      FAIL("no error for '" << bad << "'");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::parse);
      const std::string msg = e.what();
      CHECK(msg.find("mesh axis X") != std::string::npos);
      CHECK(msg.find("'" + bad + "'") != std::string::npos);
      CHECK(msg.find("positive integer") != std::string::npos);
    }
  }
}

TEST_CASE("number_syntax: decimal only, no leading zeros, no hex, inf or nan") {
  for (const std::string ok : {"0", "7", "10", "123456789012345678901234567890"}) {
    CAPTURE(ok);
    CHECK(number_syntax(ok, true).empty());
    CHECK(number_syntax(ok, false).empty());
  }
  for (const std::string ok : {"0.5", ".5", "2.", "-3", "-0.25", "1e3", "1E-3", "2.5e+10", "0e0"}) {
    CAPTURE(ok);
    CHECK(number_syntax(ok, false).empty());
    CHECK(!number_syntax(ok, true).empty());
  }
  for (const std::string bad : {"", "-", ".", "e3", "1e", "1e+", "+3", " 3", "3 ", "0x10", "0X1p3", "inf", "nan",
                                "-inf", "1,5", "1..2", "--1", "1e3.5", "0b1"}) {
    CAPTURE(bad);
    CHECK(!number_syntax(bad, true).empty());
    CHECK(!number_syntax(bad, false).empty());
  }
  for (const std::string zeros : {"010", "00", "007.5", "-01"}) {
    CAPTURE(zeros);
    CHECK(number_syntax(zeros, false) == "write it without leading zeros");
  }
  CHECK(number_syntax("010", true) == "write it without leading zeros");
}

TEST_CASE("parse_real: a finite decimal number, or one sentence naming the flag") {
  CHECK(parse_real("1e-30", "perturb") == 1e-30);
  CHECK(parse_real("-2.5", "x") == -2.5);
  CHECK(parse_real("1e-400", "x") == 0);  // below the smallest double: zero, not an error
  for (const std::string bad : {"1e999", "0x10", "inf", "nan", "", "1.5x"}) {
    CAPTURE(bad);
    try {
      parse_real(bad, "--capacity-factor");
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::parse);
      CHECK(std::string(e.what()).rfind("--capacity-factor is '" + bad + "'; ", 0) == 0);
    }
  }
}

TEST_CASE("is_identifier: letters, digits, underscore, not leading digit") {
  CHECK(is_identifier("X"));
  CHECK(is_identifier("mesh_rows"));
  CHECK(is_identifier("_"));
  CHECK(is_identifier("A1"));
  CHECK(is_identifier("_x9"));
  CHECK_FALSE(is_identifier(""));
  CHECK_FALSE(is_identifier("1A"));
  CHECK_FALSE(is_identifier("a-b"));
  CHECK_FALSE(is_identifier("a b"));
  CHECK_FALSE(is_identifier("(X)"));
  CHECK_FALSE(is_identifier("X;Y"));
}

TEST_CASE("format_number: one double through a printf format") {
  CHECK(format_number(0.5, "%.2f") == "0.50");
  CHECK(format_number(1234.5678, "%.4g") == "1235");
  CHECK(format_number(3e-10 * 1e6, "%.4g") == "0.0003");
}

TEST_CASE("read_text_file: the whole file, or an io error naming what and where") {
  const std::string path = "/tmp/shardlab_text_" + std::to_string(::getpid());
  std::ofstream(path, std::ios::binary) << "a\nb\0c";
  CHECK(read_text_file(path, "--x") == std::string("a\nb"));  // the literal stops at \0
  std::ofstream(path, std::ios::binary).write("a\0b", 3);
  CHECK(read_text_file(path, "--x") == std::string("a\0b", 3));
  std::remove(path.c_str());
  try {
    read_text_file("/nonexistent/f.csv", "--bench-csv");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::io);
    CHECK(std::string(e.what()) == "cannot read --bench-csv /nonexistent/f.csv: No such file or directory");
  }
}

TEST_CASE("excerpt: at most max characters of printable ASCII, the rest as '?', '...' after a cut") {
  CHECK(excerpt("all_reduce C over Y 12") == "all_reduce C over Y 12");
  CHECK(excerpt("a\x1b[31mb") == "a?[31mb");                // no escape sequence reaches a terminal
  CHECK(excerpt("caf\xc3\xa9") == "caf??");                  // no UTF-8 character cut in half
  CHECK(excerpt(std::string(100, 'x'), 5) == "xxxxx...");
  CHECK(excerpt(std::string(3, '\0')) == "???");
}
