// core/spec.cpp: parsing, text, notation, shards, and every validation error.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/mesh.hpp"
#include "core/spec.hpp"

using namespace shardlab;
using Strings = std::vector<std::string>;
using Dims = std::vector<Strings>;

namespace {
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

TEST_CASE("Spec::parse entries") {
  Spec a = Spec::parse("X,_,Y");
  CHECK(a.dims == Dims{{"X"}, {}, {"Y"}});
  CHECK(a.partial.empty());
  CHECK(a.rank() == 3);
  CHECK_FALSE(a.is_partial());

  Spec b = Spec::parse("(X,Y),_");
  CHECK(b.dims == Dims{{"X", "Y"}, {}});
  CHECK(b.text() == "(X,Y),_");

  Spec c = Spec::parse(" ( Y , X ) , Z ");
  CHECK(c.dims == Dims{{"Y", "X"}, {"Z"}});

  Spec d = Spec::parse("(X),_");  // a one-axis group in parentheses is the axis
  CHECK(d.dims == Dims{{"X"}, {}});
  CHECK(d.text() == "X,_");

  Spec s = Spec::parse("");  // a scalar
  CHECK(s.rank() == 0);
  CHECK(s.text() == "");
}

TEST_CASE("Spec::parse partial sums") {
  Spec p = Spec::parse("_,_{Y}");
  CHECK(p.dims == Dims{{}, {}});
  CHECK(p.partial == Strings{"Y"});
  CHECK(p.is_partial());
  CHECK(p.text() == "_,_{Y}");
  CHECK(Spec::parse("_,_{U_Y}") == p);
  Spec q = Spec::parse("X,_{Y,Z}");
  CHECK(q.partial == Strings{"Y", "Z"});
  CHECK(q.text() == "X,_{Y,Z}");
  CHECK(q.used_axes() == Strings{"X", "Y", "Z"});
  CHECK(Spec::parse("(Y,X),Z{W}").used_axes() == Strings{"Y", "X", "Z", "W"});
}

TEST_CASE("Spec text round trips through parse") {
  for (const std::string t : {"X,_,Y", "(X,Y),_", "_,_{Y}", "_", "(Z,X),Y{W}", "_,(X,Y,Z)", "X{Y,Z}"}) {
    CAPTURE(t);
    CHECK(Spec::parse(t).text() == t);
    CHECK(Spec::parse(Spec::parse(t).text()) == Spec::parse(t));
  }
  CHECK(Spec::parse("X,_") != Spec::parse("_,X"));
  CHECK(Spec::parse("_,_{Y}") != Spec::parse("_,_"));
  CHECK(Spec::parse("(X,Y)") != Spec::parse("(Y,X)"));
}

TEST_CASE("Spec::replicated") {
  Spec r = Spec::replicated(3);
  CHECK(r.dims == Dims{{}, {}, {}});
  CHECK(r.text() == "_,_,_");
  CHECK(Spec::replicated(0).rank() == 0);
}

TEST_CASE("Spec notation as in the scaling book") {
  CHECK(Spec::parse("X,_").notation("A") == "A[I_X, J]");
  CHECK(Spec::parse("_,_{U_Y}").notation("C", {"I", "K"}) == "C[I, K]{U_Y}");
  CHECK(Spec::parse("X,Y").notation("A") == "A[I_X, J_Y]");
  CHECK(Spec::parse("(X,Y),_").notation("W", {"D", "F"}) == "W[D_{XY}, F]");
  CHECK(Spec::parse("_,_,Z").notation("T") == "T[I, J, K_Z]");
  CHECK(Spec::parse("_,_{X,Y}").notation("C") == "C[I, J]{U_XY}");
  CHECK(Spec::parse("mesh_rows,_").notation("X", {"input_rows", "input_cols"}) == "X[input_rows_mesh_rows, input_cols]");
  // longer axis names are kept apart with commas
  CHECK(Spec::parse("(mesh_rows,mesh_cols),_").notation("X") == "X[I_{mesh_rows,mesh_cols}, J]");
  CHECK(Spec::parse("_{rows,cols}").notation("P") == "P[I]{U_rows,cols}");
}

TEST_CASE("Spec::parse malformed text is a parse error quoting the spec") {
  for (const std::string bad : {"(X,Y", "X;Y", "X,,Y", "X,", ",X", "()", "((X,Y)),_", "X)", ")X(", "X Y", "1X", "X{Y",
                                "X{}", "X{U_}", "X-Y", "(X,,Y)"}) {
    CAPTURE(bad);
    const std::string msg = error_of([&] { Spec::parse(bad); }, ErrorKind::parse);
    CHECK(has(msg, "'" + bad + "'"));
  }
}

TEST_CASE("Spec::shards is the product of the dim's mesh axis sizes") {
  Mesh m = Mesh::parse("X=2,Y=4");
  Spec s = Spec::parse("(X,Y),_");
  CHECK(s.shards(m, 0) == 8);
  CHECK(s.shards(m, 1) == 1);
  CHECK(Spec::parse("Y,X").shards(m, 0) == 4);
  CHECK(Spec::parse("Y,X").shards(m, 1) == 2);
}

TEST_CASE("Spec::validate accepts valid specs") {
  Mesh m = Mesh::parse("X=2,Y=4");
  CHECK_NOTHROW(Spec::parse("X,Y").validate(m, {4, 8}, "A"));
  CHECK_NOTHROW(Spec::parse("(X,Y),_").validate(m, {8, 3}, "A"));
  CHECK_NOTHROW(Spec::parse("_,_{Y}").validate(m, {3, 5}, "C"));
  CHECK_NOTHROW(Spec::parse("X,_{Y}").validate(m, {2, 5}, "C"));
  CHECK_NOTHROW(Spec::parse("").validate(m, {}, "s"));
}

TEST_CASE("Spec::validate unknown mesh axis names the axis, the spec and the mesh") {
  Mesh m = Mesh::parse("X=2,Y=4");
  std::string msg = error_of([&] { Spec::parse("X,Q").validate(m, {4, 8}, "A"); }, ErrorKind::unknown_axis);
  CHECK(has(msg, "axis Q"));
  CHECK(has(msg, "X,Q"));
  CHECK(has(msg, "X=2,Y=4"));
  CHECK(has(msg, " A "));
  msg = error_of([&] { Spec::parse("_,_{Z}").validate(m, {4, 8}, "C"); }, ErrorKind::unknown_axis);
  CHECK(has(msg, "axis Z"));
  msg = error_of([&] { Spec::parse("(X,Z),_").validate_axes(m, "B"); }, ErrorKind::unknown_axis);
  CHECK(has(msg, "axis Z"));
}

TEST_CASE("Spec::validate a mesh axis used twice in one spec") {
  Mesh m = Mesh::parse("X=2,Y=4");
  for (const std::string bad : {"X,X", "(X,X),_", "(X,Y),Y", "X,_{X}", "_,Y{Y}", "_,_{Y,Y}"}) {
    CAPTURE(bad);
    const std::string msg = error_of([&] { Spec::parse(bad).validate(m, {8, 8}, "A"); }, ErrorKind::duplicate_axis);
    CHECK(has(msg, "twice"));
    CHECK(has(msg, " of A "));
  }
  CHECK(has(error_of([&] { Spec::parse("Y,Y").validate(m, {8, 8}, "A"); }, ErrorKind::duplicate_axis), "axis Y"));
}

TEST_CASE("Spec::validate dim not divisible names dim, tensor, axis and sizes") {
  Mesh m = Mesh::parse("mesh_rows=3,mesh_cols=4");
  CHECK(error_of([&] { Spec::parse("mesh_rows,_").validate(m, {32, 8}, "X"); }, ErrorKind::not_divisible) ==
        "dim 0 of X (size 32) is not divisible by mesh axis mesh_rows (size 3)");
  Mesh m2 = Mesh::parse("X=2,Y=4");
  CHECK(error_of([&] { Spec::parse("_,Y").validate(m2, {4, 6}, "A"); }, ErrorKind::not_divisible) ==
        "dim 1 of A (size 6) is not divisible by mesh axis Y (size 4)");
  CHECK(error_of([&] { Spec::parse("(X,Y),_").validate(m2, {12, 6}, "W"); }, ErrorKind::not_divisible) ==
        "dim 0 of W (size 12) is not divisible by mesh axes (X,Y) (size 8)");
}

TEST_CASE("Spec::validate spec rank differs from tensor rank") {
  Mesh m = Mesh::parse("X=2,Y=4");
  std::string msg = error_of([&] { Spec::parse("X,_,Y").validate(m, {4, 8}, "A"); }, ErrorKind::rank_mismatch);
  CHECK(has(msg, "3 entries"));
  CHECK(has(msg, "A [4, 8]"));
  CHECK(has(msg, "rank 2"));
  msg = error_of([&] { Spec::parse("X").validate(m, {4, 8, 2}, "B"); }, ErrorKind::rank_mismatch);
  CHECK(has(msg, "1 entries"));
  CHECK(has(msg, "rank 3"));
}
