// core/layout.cpp: block_of / local_block / assemble round trips over every valid spec of rank-2 and
// rank-3 tensors on meshes 8, 2x4, 4x2 and 2x2x2; partial sums; replica disagreement; copy_out/in.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/mesh.hpp"
#include "core/spec.hpp"

using namespace shardlab;

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

// Every spec (without partial sums) of a rank-`rank` tensor over `mesh`: each mesh axis is unused
// or assigned to one dim, and the axes of one dim come in every order.
std::vector<Spec> all_specs(const Mesh& mesh, std::size_t rank) {
  const int axes = mesh.rank();
  const int choices = static_cast<int>(rank) + 1;  // 0 = unused, k = dim k-1
  int total = 1;
  for (int a = 0; a < axes; ++a) total *= choices;
  std::vector<Spec> out;
  for (int code = 0; code < total; ++code) {
    std::vector<std::vector<int>> per_dim(rank);
    int c = code;
    for (int a = 0; a < axes; ++a, c /= choices)
      if (c % choices) per_dim[c % choices - 1].push_back(a);
    // Cartesian product of the permutations of every dim's axes.
    std::vector<Spec> partial_specs{Spec::replicated(rank)};
    for (std::size_t d = 0; d < rank; ++d) {
      std::vector<Spec> next;
      std::vector<int> perm = per_dim[d];  // ascending, so next_permutation visits all orders
      do {
        for (Spec s : partial_specs) {
          for (int a : perm) s.dims[d].push_back(mesh.names()[a]);
          next.push_back(s);
        }
      } while (std::next_permutation(perm.begin(), perm.end()));
      partial_specs = next;
    }
    out.insert(out.end(), partial_specs.begin(), partial_specs.end());
  }
  return out;
}

// Independent of Mesh: row-major coordinates from the axis sizes.
std::vector<int> coords_of(const std::vector<int>& sizes, int device) {
  std::vector<int> c(sizes.size());
  for (std::size_t i = sizes.size(); i-- > 0;) {
    c[i] = device % sizes[i];
    device /= sizes[i];
  }
  return c;
}

int axis_index(const Mesh& m, const std::string& name) {
  for (int i = 0; i < m.rank(); ++i)
    if (m.names()[i] == name) return i;
  return -1;
}

bool same(const Tensor& a, const Tensor& b) { return shape_of(a) == shape_of(b) && a == b; }

Tensor filled(const Shape& shape, double value) {
  Tensor t = xt::zeros<double>(shape);
  t.fill(value);
  return t;
}

}  // namespace

TEST_CASE("the spec enumeration used below covers the expected number of specs") {
  // Arrangements of a used subset S of mesh axes into `rank` ordered lists: |S|! * C(|S|+rank-1, rank-1).
  CHECK(all_specs(Mesh::parse("8"), 2).size() == 3);     // _,_ X,_ _,X
  CHECK(all_specs(Mesh::parse("2x4"), 2).size() == 11);  // 1 + 2*(1!*2) + 1*(2!*3)
  CHECK(all_specs(Mesh::parse("2x2x2"), 2).size() == 49);
  CHECK(all_specs(Mesh::parse("2x2x2"), 3).size() == 106);
}

TEST_CASE("local_block then assemble gives back the original for every spec") {
  for (const char* mesh_text : {"8", "2x4", "4x2", "2x2x2"}) {
    const Mesh mesh = Mesh::parse(mesh_text);
    for (const Shape& global : {Shape{8, 16}, Shape{8, 8, 16}}) {
      const Tensor t = iota(global, 1.0);
      // strides of the global tensor, for the value formula t[idx] = 1 + sum idx[i]*stride[i]
      std::vector<std::size_t> stride(global.size(), 1);
      for (std::size_t i = global.size() - 1; i-- > 0;) stride[i] = stride[i + 1] * global[i + 1];
      for (const Spec& spec : all_specs(mesh, global.size())) {
        CAPTURE(mesh_text);
        CAPTURE(spec.text());
        std::vector<Tensor> blocks;
        for (int d = 0; d < mesh.devices(); ++d) {
          CAPTURE(d);
          const std::vector<int> c = coords_of(mesh.sizes(), d);
          // Expected block: dim i splits into n_i = prod(sizes of its axes) parts; device d takes
          // part k_i = its coords on those axes, row-major with the first axis major.
          Shape want_shape(global.size());
          std::vector<std::size_t> start(global.size());
          for (std::size_t i = 0; i < global.size(); ++i) {
            std::size_t n = 1, k = 0;
            for (const auto& a : spec.dims[i]) {
              const int ai = axis_index(mesh, a);
              n *= static_cast<std::size_t>(mesh.sizes()[ai]);
              k = k * static_cast<std::size_t>(mesh.sizes()[ai]) + static_cast<std::size_t>(c[ai]);
            }
            want_shape[i] = global[i] / n;
            start[i] = k * want_shape[i];
          }
          const Block b = block_of(mesh, spec, global, d);
          REQUIRE(b.start == start);
          REQUIRE(b.shape() == want_shape);
          Tensor blk = local_block(t, mesh, spec, d);
          REQUIRE(shape_of(blk) == want_shape);
          if (d == 0) CHECK(local_shape(mesh, spec, global) == want_shape);
          // every element is the global one at start + local index
          bool ok = true;
          for (std::size_t k = 0; k < blk.size() && ok; ++k) {
            std::size_t flat = k, value = 1;
            for (std::size_t i = global.size(); i-- > 0;) {
              value += (start[i] + flat % want_shape[i]) * stride[i];
              flat /= want_shape[i];
            }
            ok = blk.data()[k] == static_cast<double>(value);
          }
          CHECK(ok);
          blocks.push_back(blk);
        }
        const Assembly a = assemble(mesh, spec, global, blocks, "A");
        CHECK(a.replicas_agree);
        CHECK(a.disagreement.empty());
        CHECK(same(a.tensor, t));
      }
    }
  }
}

TEST_CASE("Block text and shape") {
  Mesh m = Mesh::parse("X=2,Y=4");
  Block b = block_of(m, Spec::parse("X,Y"), {32, 256}, 6);  // x=1, y=2
  CHECK(b.text() == "[16:32, 128:192]");
  CHECK(b.shape() == Shape{16, 64});
  Block r = block_of(m, Spec::parse("_,(Y,X)"), {3, 16}, 6);  // y=2, x=1: part 2*2+1 = 5 of 8
  CHECK(r.text() == "[0:3, 10:12]");
}

TEST_CASE("layout functions reject invalid specs with the validation errors") {
  Mesh m = Mesh::parse("X=2,Y=4");
  Tensor t = iota({6, 8});
  CHECK(error_of([&] { local_block(t, m, Spec::parse("Y,_"), 0); }, ErrorKind::not_divisible).find("size 6") !=
        std::string::npos);
  CHECK(error_of([&] { block_of(m, Spec::parse("X"), {6, 8}, 0); }, ErrorKind::rank_mismatch) != "");
  CHECK(error_of([&] { local_shape(m, Spec::parse("Q,_"), {6, 8}); }, ErrorKind::unknown_axis) != "");
  std::vector<Tensor> blocks(8, iota({6, 8}));
  CHECK(error_of([&] { assemble(m, Spec::parse("X,X"), {6, 8}, blocks, "A"); }, ErrorKind::duplicate_axis) != "");
}

TEST_CASE("assemble sums the blocks along partial axes") {
  Mesh m = Mesh::parse("X=2,Y=4");
  // C[I_X, J]{U_Y} of shape [4, 2]: device (x, y) holds rows 2x..2x+1, scaled by y+1.
  std::vector<Tensor> blocks;
  for (int d = 0; d < 8; ++d) {
    const int x = d / 4, y = d % 4;
    Tensor b = xt::zeros<double>(Shape{2, 2});
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) b(i, j) = (y + 1) * (10 * (2 * x + i) + j);
    blocks.push_back(b);
  }
  // sum over y of (y+1) = 10, so C(r, j) = 10 * (10r + j)
  Tensor want = xt::zeros<double>(Shape{4, 2});
  for (int r = 0; r < 4; ++r)
    for (int j = 0; j < 2; ++j) want(r, j) = 10 * (10 * r + j);
  Assembly a = assemble(m, Spec::parse("X,_{Y}"), {4, 2}, blocks, "C");
  CHECK(a.replicas_agree);
  CHECK(same(a.tensor, want));

  // Fully replicated partial sum over both axes: the total is the sum of all 8 blocks.
  std::vector<Tensor> ones;
  for (int d = 0; d < 8; ++d) ones.push_back(filled({3}, d + 1));
  Assembly all = assemble(m, Spec::parse("_{X,Y}"), {3}, ones, "s");
  CHECK(same(all.tensor, filled({3}, 36.0)));  // 1+2+...+8
}

TEST_CASE("assemble detects replica disagreement within a partial term") {
  Mesh m = Mesh::parse("X=2,Y=4");
  // C[I, J]{U_Y}: devices with the same y (x = 0 and 1) are replicas of term y.
  std::vector<Tensor> blocks;
  for (int d = 0; d < 8; ++d) blocks.push_back(filled({2, 2}, d % 4 + 1));
  Assembly ok = assemble(m, Spec::parse("_,_{Y}"), {2, 2}, blocks, "C");
  CHECK(ok.replicas_agree);
  CHECK(same(ok.tensor, filled({2, 2}, 10.0)));
  blocks[4](1, 0) = 99;  // device 4 = (x=1, y=0), replica of device 0 which has 1
  Assembly bad = assemble(m, Spec::parse("_,_{Y}"), {2, 2}, blocks, "C");
  CHECK_FALSE(bad.replicas_agree);
  CHECK(bad.disagreement ==
        "replicas of C disagree: device 4 has 99 at local index 2 of its block [0:2, 0:2], an earlier replica has 1");
}

TEST_CASE("assemble detects replica disagreement without partial sums") {
  Mesh m = Mesh::parse("X=2,Y=4");
  Tensor t = iota({4, 3});
  std::vector<Tensor> blocks;
  for (int d = 0; d < 8; ++d) blocks.push_back(local_block(t, m, Spec::parse("X,_"), d));
  CHECK(assemble(m, Spec::parse("X,_"), {4, 3}, blocks, "A").replicas_agree);
  blocks[6](0, 0) = -1;  // device 6 = (x=1, y=2) holds rows 2..3; element 0 is t(2,0) = 6
  Assembly a = assemble(m, Spec::parse("X,_"), {4, 3}, blocks, "A");
  CHECK_FALSE(a.replicas_agree);
  CHECK(a.disagreement ==
        "replicas of A disagree: device 6 has -1 at local index 0 of its block [2:4, 0:3], an earlier replica has 6");
}

TEST_CASE("assemble checks the number and shapes of blocks") {
  Mesh m = Mesh::parse("X=2,Y=4");
  std::vector<Tensor> seven(7, xt::zeros<double>(Shape{2, 3}));
  CHECK(error_of([&] { assemble(m, Spec::parse("X,_"), {4, 3}, seven, "A"); }, ErrorKind::rank_mismatch) ==
        "assembling A needs 8 blocks, got 7");
  std::vector<Tensor> eight(8, xt::zeros<double>(Shape{2, 3}));
  eight[3] = xt::zeros<double>(Shape{1, 1});
  CHECK(error_of([&] { assemble(m, Spec::parse("X,_"), {4, 3}, eight, "A"); }, ErrorKind::rank_mismatch) ==
        "device 3 holds A block [1, 1], expected [2, 3]");
}

TEST_CASE("copy_out and copy_in move one slab along a dim") {
  const Shape shape{2, 3, 4};
  Tensor t = iota(shape);
  // dim 1, rows 1..2: for each of the 2 outer indices, elements 12o+4 .. 12o+11
  std::vector<double> buf(16);
  copy_out(t.data(), DType::float64, shape, 1, 1, 2, buf.data(), DType::float64);
  std::vector<double> want;
  for (int v = 4; v < 12; ++v) want.push_back(v);
  for (int v = 16; v < 24; ++v) want.push_back(v);
  CHECK(buf == want);

  Tensor back = xt::zeros<double>(shape);
  copy_in(back.data(), DType::float64, shape, 1, 1, 2, buf.data(), DType::float64);
  for (std::size_t a = 0; a < 2; ++a)
    for (std::size_t b = 0; b < 3; ++b)
      for (std::size_t c = 0; c < 4; ++c) CHECK(back(a, b, c) == (b == 0 ? 0.0 : t(a, b, c)));

  // last dim: columns 2..3 of every row
  std::vector<double> cols(12);
  copy_out(t.data(), DType::float64, shape, 2, 2, 2, cols.data(), DType::float64);
  for (std::size_t r = 0; r < 6; ++r) {
    CHECK(cols[2 * r] == 4.0 * r + 2);
    CHECK(cols[2 * r + 1] == 4.0 * r + 3);
  }
  // first dim: the second half, one contiguous run
  std::vector<double> half(12);
  copy_out(t.data(), DType::float64, shape, 0, 1, 1, half.data(), DType::float64);
  for (std::size_t i = 0; i < 12; ++i) CHECK(half[i] == 12.0 + i);
}
