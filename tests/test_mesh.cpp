// core/mesh.cpp: parsing, row-major device ids, groups along axis subsets, index_along, parse_axes,
// the ASCII picture.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/mesh.hpp"
#include "tests/bad_meshes.hpp"

using namespace shardlab;
using Ints = std::vector<int>;
using Strings = std::vector<std::string>;

namespace {
// Runs f, which must throw shardlab::Error of `kind`; returns its message ("" if it did not throw).
template <class F>
std::string error_of(F f, ErrorKind kind) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == kind);
    return e.what();
  }
  FAIL_CHECK("expected a shardlab::Error");
  return "";
}
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("Mesh::parse named axes") {
  Mesh m = Mesh::parse("X=2,Y=4");
  CHECK(m.rank() == 2);
  CHECK(m.names() == Strings{"X", "Y"});
  CHECK(m.sizes() == Ints{2, 4});
  CHECK(m.devices() == 8);
  CHECK(m.text() == "X=2,Y=4");

  Mesh t5 = Mesh::parse(" mesh_rows = 2 , mesh_cols = 4 ");
  CHECK(t5.names() == Strings{"mesh_rows", "mesh_cols"});
  CHECK(t5.sizes() == Ints{2, 4});
  CHECK(t5.text() == "mesh_rows=2,mesh_cols=4");
  CHECK(t5.axis("mesh_cols") == 1);
  CHECK(t5.axis_size("mesh_rows") == 2);
  CHECK(t5.has_axis("mesh_rows"));
  CHECK_FALSE(t5.has_axis("X"));
}

TEST_CASE("Mesh::parse shorthand") {
  Mesh a = Mesh::parse("2x4");
  CHECK(a.names() == Strings{"X", "Y"});
  CHECK(a.sizes() == Ints{2, 4});
  Mesh b = Mesh::parse("8");
  CHECK(b.names() == Strings{"X"});
  CHECK(b.sizes() == Ints{8});
  CHECK(b.devices() == 8);
  Mesh c = Mesh::parse("2x2x2");
  CHECK(c.names() == Strings{"X", "Y", "Z"});
  CHECK(c.sizes() == Ints{2, 2, 2});
  CHECK(c.text() == "X=2,Y=2,Z=2");
  Mesh d = Mesh::parse("1x2x1x2");
  CHECK(d.names() == Strings{"X", "Y", "Z", "W"});
  CHECK(d.devices() == 4);
  // The header promises "X, Y, Z, W, then A1, A2 ...".
  Mesh e = Mesh::parse("1x1x1x1x2x3");
  CHECK(e.names() == Strings{"X", "Y", "Z", "W", "A1", "A2"});
  CHECK(e.devices() == 6);
}

TEST_CASE("Mesh::parse errors are parse errors naming the bad part") {
  CHECK(has(error_of([] { Mesh::parse("X=0"); }, ErrorKind::parse), "'0'"));
  CHECK(has(error_of([] { Mesh::parse("X=0"); }, ErrorKind::parse), "X"));
  CHECK(has(error_of([] { Mesh::parse("X=2,,Y=4"); }, ErrorKind::parse), "NAME=SIZE"));
  CHECK(has(error_of([] { Mesh::parse("2xq"); }, ErrorKind::parse), "'q'"));
  CHECK(has(error_of([] { Mesh::parse("X=-2"); }, ErrorKind::parse), "'-2'"));
  CHECK(has(error_of([] { Mesh::parse("X=2,Y"); }, ErrorKind::parse), "'Y'"));
  CHECK(has(error_of([] { Mesh::parse("=2"); }, ErrorKind::parse), "NAME=SIZE"));
  CHECK(has(error_of([] { Mesh::parse("X=2=3"); }, ErrorKind::parse), "NAME=SIZE"));
  CHECK(has(error_of([] { Mesh::parse("2x"); }, ErrorKind::parse), "''"));
  CHECK(has(error_of([] { Mesh::parse("0x4"); }, ErrorKind::parse), "'0'"));
  CHECK(has(error_of([] { Mesh::parse("1-a=2"); }, ErrorKind::parse), "1-a"));
  CHECK(has(error_of([] { Mesh::parse("X=2.5"); }, ErrorKind::parse), "'2.5'"));
  CHECK(has(error_of([] { Mesh::parse(""); }, ErrorKind::parse), "empty"));
  CHECK(has(error_of([] { Mesh::parse("   "); }, ErrorKind::parse), "empty"));
  CHECK(has(error_of([] { Mesh::parse("X=2,X=4"); }, ErrorKind::duplicate_axis), "X"));
}

// tests/test_hostile_input.cpp gives each binary only some of the malformed texts (they all reach
// this parser), so each must be refused here, where it costs nothing; the bad sizes too.
TEST_CASE("Mesh::parse refuses every malformed mesh of the hostile-input suite") {
  for (const auto* list : {&shardlab::testing::kBadMeshSizes, &shardlab::testing::kBadMeshTexts})
    for (const std::string& m : *list) {
      CAPTURE(m);
      CHECK_THROWS_AS(Mesh::parse(m), Error);
    }
}

TEST_CASE("Mesh device count is bounded, without integer overflow") {
  CHECK(has(error_of([] { Mesh::parse("X=8192"); }, ErrorKind::parse), "4096"));
  CHECK(has(error_of([] { Mesh::parse("64x128"); }, ErrorKind::parse), "4096"));
  CHECK(Mesh::parse("64x64").devices() == 4096);
  // 65536 * 65536 = 2^32 overflows a 32-bit int (to 0); must still be rejected.
  CHECK(has(error_of([] { Mesh::parse("65536x65536"); }, ErrorKind::parse), "4096"));
  CHECK(has(error_of([] { Mesh::parse("999999999x999999999x999999999"); }, ErrorKind::parse), "4096"));
}

TEST_CASE("Mesh constructor validates names and sizes") {
  CHECK(error_of([] { Mesh({}, {}); }, ErrorKind::parse) != "");
  CHECK(error_of([] { Mesh({"X"}, {2, 3}); }, ErrorKind::parse) != "");
  CHECK(has(error_of([] { Mesh({"X", "9a"}, {2, 3}); }, ErrorKind::parse), "9a"));
  CHECK(has(error_of([] { Mesh({"X", "Y"}, {2, 0}); }, ErrorKind::parse), "size 0"));
  CHECK(has(error_of([] { Mesh({"X", "X"}, {2, 2}); }, ErrorKind::duplicate_axis), "X"));
  CHECK(has(error_of([] { Mesh::parse("X=2").axis("Q"); }, ErrorKind::unknown_axis), "Q"));
}

TEST_CASE("device id <-> coords is row-major") {
  Mesh m = Mesh::parse("X=2,Y=4");
  // Written out by hand: device 5 is X=1,Y=1.
  const std::vector<Ints> want = {{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 0}, {1, 1}, {1, 2}, {1, 3}};
  for (int d = 0; d < 8; ++d) {
    CHECK(m.coords(d) == want[d]);
    CHECK(m.device(want[d]) == d);
  }
  Mesh m3 = Mesh::parse("2x3x4");
  CHECK(m3.coords(0) == Ints{0, 0, 0});
  CHECK(m3.coords(1) == Ints{0, 0, 1});
  CHECK(m3.coords(4) == Ints{0, 1, 0});
  CHECK(m3.coords(12) == Ints{1, 0, 0});
  CHECK(m3.coords(23) == Ints{1, 2, 3});
  CHECK(m3.coords(17) == Ints{1, 1, 1});  // 17 = 1*12 + 1*4 + 1
  for (int d = 0; d < m3.devices(); ++d) {
    auto c = m3.coords(d);
    CHECK(c[0] * 12 + c[1] * 4 + c[2] == d);
    CHECK(m3.device(c) == d);
  }
}

TEST_CASE("groups along one axis, several axes and in either order") {
  Mesh m = Mesh::parse("X=2,Y=4");
  CHECK(m.group(5, {"Y"}) == Ints{4, 5, 6, 7});
  CHECK(m.group(5, {"X"}) == Ints{1, 5});
  CHECK(m.group(0, {"X"}) == Ints{0, 4});
  CHECK(m.group(5, {"X", "Y"}) == Ints{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(m.group(5, {"Y", "X"}) == Ints{0, 4, 1, 5, 2, 6, 3, 7});
  CHECK(m.group(6, {}) == Ints{6});
  CHECK(m.groups({"Y"}) == std::vector<Ints>{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(m.groups({"X"}) == std::vector<Ints>{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(m.groups({"Y", "X"}) == std::vector<Ints>{{0, 4, 1, 5, 2, 6, 3, 7}});
  CHECK(m.groups({}).size() == 8);

  Mesh c = Mesh::parse("2x2x2");  // device = 4x + 2y + z
  CHECK(c.group(0, {"X", "Z"}) == Ints{0, 1, 4, 5});
  CHECK(c.group(3, {"Z", "X"}) == Ints{2, 6, 3, 7});
  CHECK(c.group(3, {"Y"}) == Ints{1, 3});
  CHECK(c.group(6, {"Z", "Y", "X"}) == Ints{0, 4, 2, 6, 1, 5, 3, 7});
  CHECK(c.groups({"X", "Y"}) == std::vector<Ints>{{0, 2, 4, 6}, {1, 3, 5, 7}});
  CHECK(c.groups({"Z"}) == std::vector<Ints>{{0, 1}, {2, 3}, {4, 5}, {6, 7}});

  CHECK(m.axes_size({"X", "Y"}) == 8);
  CHECK(m.axes_size({"Y"}) == 4);
  CHECK(m.axes_size({}) == 1);
  CHECK(error_of([&] { m.group(0, {"Q"}); }, ErrorKind::unknown_axis) != "");
}

TEST_CASE("every group has the right size, holds the device, and index_along is its position") {
  for (const char* text : {"8", "2x4", "4x2", "2x2x2", "3x2"}) {
    Mesh m = Mesh::parse(text);
    const std::vector<Strings> subsets = m.rank() == 1 ? std::vector<Strings>{{"X"}}
                                         : m.rank() == 2
                                             ? std::vector<Strings>{{"X"}, {"Y"}, {"X", "Y"}, {"Y", "X"}}
                                             : std::vector<Strings>{{"X"}, {"Z"}, {"Y", "Z"}, {"Z", "X"}, {"Z", "Y", "X"}};
    for (const auto& axes : subsets) {
      int want_size = 1;
      for (const auto& a : axes) want_size *= m.axis_size(a);
      int covered = 0;
      for (const auto& g : m.groups(axes)) covered += static_cast<int>(g.size());
      CHECK(covered == m.devices());
      for (int d = 0; d < m.devices(); ++d) {
        CAPTURE(text);
        CAPTURE(d);
        auto g = m.group(d, axes);
        REQUIRE(static_cast<int>(g.size()) == want_size);
        const int k = m.index_along(d, axes);
        REQUIRE(k >= 0);
        REQUIRE(k < want_size);
        CHECK(g[k] == d);
        for (std::size_t i = 0; i < g.size(); ++i) {
          CHECK(m.index_along(g[i], axes) == static_cast<int>(i));
          CHECK(m.group(g[i], axes) == g);  // the same group seen from any member
          // members differ from d only along `axes`
          auto cd = m.coords(d), cm = m.coords(g[i]);
          for (int a = 0; a < m.rank(); ++a) {
            bool in_axes = false;
            for (const auto& name : axes) in_axes = in_axes || m.names()[a] == name;
            if (!in_axes) CHECK(cd[a] == cm[a]);
          }
        }
      }
    }
  }
}

TEST_CASE("index_along by hand") {
  Mesh m = Mesh::parse("X=2,Y=4");
  CHECK(m.index_along(6, {"Y"}) == 2);
  CHECK(m.index_along(6, {"X"}) == 1);
  CHECK(m.index_along(6, {"X", "Y"}) == 6);
  CHECK(m.index_along(6, {"Y", "X"}) == 5);  // y=2, x=1: 2*2 + 1
  CHECK(m.index_along(6, {}) == 0);
}

TEST_CASE("parse_axes and axes_text") {
  Mesh m = Mesh::parse("X=2,Y=4");
  CHECK(parse_axes(m, "X,Y") == Strings{"X", "Y"});
  CHECK(parse_axes(m, "(Y, X)") == Strings{"Y", "X"});
  CHECK(parse_axes(m, "Y") == Strings{"Y"});
  CHECK(parse_axes(m, "").empty());
  CHECK(parse_axes(m, "()").empty());
  CHECK(has(error_of([&] { parse_axes(m, "X,Q"); }, ErrorKind::unknown_axis), "Q"));
  CHECK(has(error_of([&] { parse_axes(m, "X,X"); }, ErrorKind::duplicate_axis), "X"));
  CHECK(axes_text({"X", "Y"}) == "X,Y");
  CHECK(axes_text({}) == "");
}

TEST_CASE("picture of a 2-D mesh") {
  Mesh m = Mesh::parse("X=2,Y=4");
  const std::string want =
      "      Y ->\n"
      "     +----+----+----+----+\n"
      "X=0  | d0 | d1 | d2 | d3 |\n"
      "     +----+----+----+----+\n"
      "X=1  | d4 | d5 | d6 | d7 |\n"
      "     +----+----+----+----+\n";
  CHECK(m.picture() == want);
  const std::string labelled = m.picture([](int d) { return "A" + std::to_string(d * 10); });
  CHECK(has(labelled, "| A0  | A10 | A20 | A30 |"));
  CHECK(has(labelled, "| A40 | A50 | A60 | A70 |"));
}

TEST_CASE("picture of 1-D and 3-D meshes") {
  Mesh line = Mesh::parse("4");
  CHECK(line.picture() ==
        " X ->\n"
        "+----+----+----+----+\n"
        "| d0 | d1 | d2 | d3 |\n"
        "+----+----+----+----+\n");
  Mesh cube = Mesh::parse("2x2x2");
  const std::string p = cube.picture();
  CHECK(has(p, "X=0:\n"));
  CHECK(has(p, "X=1:\n"));
  CHECK(has(p, "Y=0  | d0 | d1 |"));
  CHECK(has(p, "Y=1  | d2 | d3 |"));
  CHECK(has(p, "Y=0  | d4 | d5 |"));
  CHECK(has(p, "Y=1  | d6 | d7 |"));
  CHECK(p.find("X=0:") < p.find("X=1:"));
}

TEST_CASE("picture too wide for its columns goes in bands of the last axis, each line within them") {
  auto widest = [](const std::string& p) {
    std::size_t w = 0, at = 0;
    for (std::size_t nl = p.find('\n'); nl != std::string::npos; at = nl + 1, nl = p.find('\n', at))
      w = std::max(w, nl - at);
    return w;
  };
  const Mesh row = Mesh::parse("X=1,Y=8");
  const auto label = [](int d) { return "[0:16, " + std::to_string(d * 16) + ":" + std::to_string(d * 16 + 16) + "]"; };
  const std::string p = row.picture(label);
  CHECK(widest(p) <= 100);
  CHECK(has(p, " Y=0..3 of 8 ->\n"));  // two bands of four boxes, not six and two
  CHECK(has(p, " Y=4..7 of 8 ->\n"));
  CHECK(has(p, "X=0  | [0:16, 64:80]   | [0:16, 80:96]   | [0:16, 96:112]  | [0:16, 112:128] |\n"));
  CHECK(p.find("Y=0..3") < p.find("Y=4..7"));
  // A narrow picture stays one grid, as before.
  CHECK(Mesh::parse("X=1,Y=8").picture().find("..") == std::string::npos);
  // Any width, any label: one box per line at worst, and a label too wide for that cut with '~'.
  for (std::size_t columns : {40, 60, 100}) {
    CAPTURE(columns);
    const std::string q = Mesh::parse("X=2,Y=8").picture([](int) { return std::string(150, 'a'); }, columns);
    CHECK(widest(q) <= columns);
    CHECK(has(q, "a~ |"));
    CHECK(widest(Mesh::parse("A=2,B=2,C=16").picture(nullptr, columns)) <= columns);
  }
}
