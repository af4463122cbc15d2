// core/table.cpp: aligned columns (numbers right, text left) and human_bytes.
#include <doctest/doctest.h>

#include <string>

#include "core/table.hpp"

using namespace shardlab;

TEST_CASE("Table aligns text left and numbers right") {
  Table t({"name", "bytes"});
  t.add({"all_gather", "96"});
  t.add({"x", "1024"});
  // widths: name 10, bytes 5; two spaces between columns; default indent two spaces
  CHECK(t.text() ==
        "  name        bytes\n"
        "  all_gather     96\n"
        "  x            1024\n");
  CHECK(t.text("") ==
        "name        bytes\n"
        "all_gather     96\n"
        "x            1024\n");
}

TEST_CASE("Table: numeric cells include decimals, signs, exponents and a '*' mark; trailing blanks trimmed") {
  Table t({"a", "b", "c"});
  t.add({"1.5", "-3", "text"});
  t.add({"96*", "1e3", ""});
  t.add({"q"});  // short row: missing cells are blank
  // widths 3, 3, 4; header cells are always left-aligned
  CHECK(t.text("") ==
        "a    b    c\n"
        "1.5   -3  text\n"
        "96*  1e3\n"
        "q\n");
}

TEST_CASE("Table: header cells stay left-aligned even when they look like numbers") {
  Table t({"op", "8"});
  t.add({"ag", "1024"});
  CHECK(t.text("") ==
        "op  8\n"
        "ag  1024\n");
}

TEST_CASE("Table: alignment is per column; '-' follows its column, numbers in a text column go left") {
  Table t({"op", "bytes", "note"});
  t.add({"ag", "1024", "-"});
  t.add({"ar", "-", "all of h"});
  t.add({"rs", "8", "12"});
  CHECK(t.text("") ==
        "op  bytes  note\n"
        "ag   1024  -\n"
        "ar      -  all of h\n"
        "rs      8  12\n");
}

TEST_CASE("human_bytes") {
  CHECK(human_bytes(0) == "0 B");
  CHECK(human_bytes(1023) == "1023 B");
  CHECK(human_bytes(1024) == "1.0 KiB");
  CHECK(human_bytes(1536) == "1.5 KiB");
  CHECK(human_bytes(1048576) == "1.0 MiB");
  CHECK(human_bytes(3.0 * 1024 * 1024 * 1024) == "3.0 GiB");
  CHECK(human_bytes(2.0 * 1024 * 1024 * 1024 * 1024) == "2.0 TiB");
  CHECK(human_bytes(1024.0 * 1024 * 1024 * 1024 * 1024) == "1024.0 TiB");  // TiB is the largest unit
}
