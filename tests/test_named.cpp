// core/named.cpp: mappings (T5 "a:b", Flax "a->b"), spec_from_mapping, broadcasting by name.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/named.hpp"

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
bool same(const Tensor& a, const Tensor& b) { return shape_of(a) == shape_of(b) && a == b; }

// a[i, j] = [[1, 2, 3], [4, 5, 6]]
NamedTensor a_ij() {
  NamedTensor a;
  a.names = {"i", "j"};
  a.data = Tensor{{1, 2, 3}, {4, 5, 6}};
  return a;
}
NamedTensor named(Strings names, Tensor data) {
  NamedTensor t;
  t.names = std::move(names);
  t.data = std::move(data);
  return t;
}
}  // namespace

TEST_CASE("parse_mapping forms") {
  CHECK(parse_mapping("input_rows:mesh_rows,input_cols:mesh_cols") ==
        AxisMapping{{"input_rows", "mesh_rows"}, {"input_cols", "mesh_cols"}});
  CHECK(parse_mapping("batch->X") == AxisMapping{{"batch", "X"}});
  CHECK(parse_mapping("batch -> X, embed -> Y") == AxisMapping{{"batch", "X"}, {"embed", "Y"}});
  CHECK(parse_mapping("{}").empty());
  CHECK(parse_mapping("").empty());
  CHECK(parse_mapping(" { } ").empty());
  CHECK(parse_mapping("{input_rows: mesh_rows}") == AxisMapping{{"input_rows", "mesh_rows"}});
  CHECK(parse_mapping("{'batch': 'X', \"embed\": \"Y\"}") == AxisMapping{{"batch", "X"}, {"embed", "Y"}});
}

TEST_CASE("parse_mapping errors") {
  for (const std::string bad : {"batch", "batch:", ":X", "a:b,,c:d", "1a:X", "a:X Y", "a->", "a-b:X"}) {
    CAPTURE(bad);
    CHECK(error_of([&] { parse_mapping(bad); }, ErrorKind::parse) != "");
  }
  CHECK(has(error_of([] { parse_mapping("batch"); }, ErrorKind::parse), "'batch'"));
  CHECK(has(error_of([] { parse_mapping("a:X,a:Y"); }, ErrorKind::duplicate_axis), "tensor axis a twice"));
}

TEST_CASE("check_mapping_names: a mapping for one tensor names only its axes") {
  const std::vector<std::string> dims = {"input_rows", "input_cols"};
  CHECK_NOTHROW(check_mapping_names({{"input_rows", "mesh_rows"}}, dims, "X"));
  CHECK_NOTHROW(check_mapping_names({}, dims, "X"));
  const std::string e = error_of([&] { check_mapping_names({{"batch", "mesh_rows"}}, dims, "X"); }, ErrorKind::unknown_axis);
  CHECK(has(e, "tensor axis batch"));
  CHECK(has(e, "X has only input_rows, input_cols"));
}

TEST_CASE("mapping_text") {
  CHECK(mapping_text({{"input_rows", "mesh_rows"}}) == "{input_rows: mesh_rows}");
  CHECK(mapping_text({{"batch", "X"}, {"embed", "Y"}}) == "{batch: X, embed: Y}");
  CHECK(mapping_text({}) == "{}");
}

TEST_CASE("spec_from_mapping") {
  Mesh m = Mesh::parse("mesh_rows=2,mesh_cols=4");
  AxisMapping t5 = parse_mapping("input_rows:mesh_rows,input_cols:mesh_cols");
  Spec s = spec_from_mapping({"input_rows", "input_cols"}, t5, m, "X", {32, 256});
  CHECK(s.dims == Dims{{"mesh_rows"}, {"mesh_cols"}});
  CHECK(s.partial.empty());
  // dims the mapping does not list are replicated; entries for absent dims are ignored
  Spec r = spec_from_mapping({"batch", "input_cols", "hidden"}, t5, m, "H");
  CHECK(r.dims == Dims{{}, {"mesh_cols"}, {}});
  Spec none = spec_from_mapping({"a", "b"}, parse_mapping("{}"), m, "A");
  CHECK(none == Spec::replicated(2));
  // Flax rules; two mesh axes for one dim in mapping order
  Mesh xy = Mesh::parse("X=2,Y=4");
  CHECK(spec_from_mapping({"batch", "embed"}, parse_mapping("batch->X,embed->Y"), xy, "x").text() == "X,Y");
  CHECK(spec_from_mapping({"embed", "batch"}, parse_mapping("batch->X,embed->Y"), xy, "x").text() == "Y,X");
}

TEST_CASE("spec_from_mapping errors name the axis, dim and sizes") {
  Mesh m = Mesh::parse("mesh_rows=3,mesh_cols=4");
  AxisMapping t5 = parse_mapping("input_rows:mesh_rows,input_cols:mesh_cols");
  CHECK(error_of([&] { spec_from_mapping({"input_rows", "input_cols"}, t5, m, "X", {32, 256}); },
                 ErrorKind::not_divisible) == "dim 0 of X (size 32) is not divisible by mesh axis mesh_rows (size 3)");
  std::string msg = error_of([&] { spec_from_mapping({"batch"}, parse_mapping("batch->Q"), m, "x"); },
                             ErrorKind::unknown_axis);
  CHECK(has(msg, "axis Q"));
  CHECK(has(msg, "mesh_rows=3,mesh_cols=4"));
  msg = error_of([&] { spec_from_mapping({"batch", "seq"}, parse_mapping("batch->mesh_rows,seq->mesh_rows"), m, "x"); },
                 ErrorKind::duplicate_axis);
  CHECK(has(msg, "mesh_rows"));
  CHECK(has(msg, "twice"));
}

TEST_CASE("named_add broadcasts by name, not position") {
  NamedTensor a = a_ij();
  // b over j only
  NamedTensor s = named_add(a, named({"j"}, Tensor{10, 20, 30}));
  CHECK(s.names == Strings{"i", "j"});
  CHECK(same(s.data, Tensor{{11, 22, 33}, {14, 25, 36}}));
  // b over (j, i): matched by name, so b is read transposed
  NamedTensor t = named_add(a, named({"j", "i"}, Tensor{{1, 2}, {3, 4}, {5, 6}}));
  CHECK(t.names == Strings{"i", "j"});
  CHECK(same(t.data, Tensor{{2, 5, 8}, {6, 9, 12}}));
  // b over a new name k: outer sum with dims (i, j, k)
  NamedTensor o = named_add(a, named({"k"}, Tensor{100, 200}));
  CHECK(o.names == Strings{"i", "j", "k"});
  CHECK(same(o.data, Tensor{{{101, 201}, {102, 202}, {103, 203}}, {{104, 204}, {105, 205}, {106, 206}}}));
  // size-1 dims broadcast, from either operand
  NamedTensor one = named_add(a, named({"i", "j"}, Tensor{{1, 0, -1}}));
  CHECK(same(one.data, Tensor{{2, 2, 2}, {5, 5, 5}}));
  NamedTensor grow = named_add(named({"j"}, Tensor{7}), named({"j"}, Tensor{1, 2, 3}));
  CHECK(same(grow.data, Tensor{8, 9, 10}));
}

TEST_CASE("named_mul broadcasts by name") {
  NamedTensor a = a_ij();
  NamedTensor p = named_mul(a, named({"j"}, Tensor{10, 20, 30}));
  CHECK(p.names == Strings{"i", "j"});
  CHECK(same(p.data, Tensor{{10, 40, 90}, {40, 100, 180}}));
  // b[k, j]: result (i, j, k) = a[i, j] * b[k, j]
  NamedTensor q = named_mul(a, named({"k", "j"}, Tensor{{1, 0, 1}, {2, 2, 2}}));
  CHECK(q.names == Strings{"i", "j", "k"});
  CHECK(same(q.data, Tensor{{{1, 2}, {0, 4}, {3, 6}}, {{4, 8}, {0, 10}, {6, 12}}}));
  // b's extra dim first: result keeps a's dims first
  NamedTensor r = named_mul(named({"j"}, Tensor{1, 2, 3}), a);
  CHECK(r.names == Strings{"j", "i"});
  CHECK(same(r.data, Tensor{{1, 4}, {4, 10}, {9, 18}}));
}

TEST_CASE("named_sum reduces one named dim") {
  NamedTensor a = a_ij();
  NamedTensor si = named_sum(a, "i");
  CHECK(si.names == Strings{"j"});
  CHECK(same(si.data, Tensor{5, 7, 9}));
  NamedTensor sj = named_sum(a, "j");
  CHECK(sj.names == Strings{"i"});
  CHECK(same(sj.data, Tensor{6, 15}));
  NamedTensor t = named({"a", "b", "c"}, iota({2, 3, 2}));  // t[a,b,c] = 6a + 2b + c
  NamedTensor sb = named_sum(t, "b");  // 3*(6a + c) + (0+2+4)
  CHECK(sb.names == Strings{"a", "c"});
  CHECK(same(sb.data, Tensor{{6, 9}, {24, 27}}));
}

TEST_CASE("named operations reject mismatched sizes, unknown names and bad ranks") {
  NamedTensor a = a_ij();
  CHECK(error_of([&] { named_add(a, named({"j"}, Tensor{1, 2})); }, ErrorKind::rank_mismatch) ==
        "dim j has size 3 in one operand and 2 in the other");
  CHECK(has(error_of([&] { named_sum(a, "k"); }, ErrorKind::rank_mismatch), "no dim named k"));
  CHECK(has(error_of([&] { a.dim("z"); }, ErrorKind::rank_mismatch), "(i, j)"));
  CHECK(a.dim("j") == 1);
  CHECK(error_of([&] { named_mul(a, named({"i", "j"}, Tensor{1, 2})); }, ErrorKind::rank_mismatch) != "");
}
