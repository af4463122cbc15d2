// core/einsum.cpp: parsing, letter classes, the BLAS contraction against hand-written sums and the
// article's worked numbers, and the broadcast-and-sum reference.
#include <doctest/doctest.h>

#include <string>

#include "core/einsum.hpp"
#include "core/error.hpp"

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
  FAIL("expected a shardlab::Error");
  return "";
}
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
bool same(const Tensor& a, const Tensor& b) { return shape_of(a) == shape_of(b) && a == b; }

// Sum over k of a[i,k] b[k,j], written out with plain loops: an independent check.
Tensor loop_matmul(const Tensor& a, const Tensor& b) {
  const std::size_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  Tensor c = xt::zeros<double>(Shape{m, n});
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t p = 0; p < k; ++p) c(i, j) += a(i, p) * b(p, j);
  return c;
}
}  // namespace

TEST_SUITE("einsum") {
  TEST_CASE("parse: letter classes of matmul, the FFN einsums and a batched product") {
    Einsum mm = Einsum::parse("ik,kj->ij");
    CHECK(mm.contracted() == "k");
    CHECK(mm.a_free() == "i");
    CHECK(mm.b_free() == "j");
    CHECK(mm.batch() == "");
    Einsum ffn = Einsum::parse(" bsm , mh -> bsh ");
    CHECK(ffn.a == "bsm");
    CHECK(ffn.contracted() == "m");
    CHECK(ffn.a_free() == "bs");
    CHECK(ffn.b_free() == "h");
    CHECK(ffn.text() == "bsm,mh->bsh");
    Einsum bmm = Einsum::parse("bij,bjk->bik");
    CHECK(bmm.batch() == "b");
    CHECK(bmm.contracted() == "j");
    CHECK(Einsum::parse("ik,kj").out == "ij");  // numpy's implicit output
    CHECK(Einsum::parse("i,i->").out == "");     // dot product: a scalar
  }

  TEST_CASE("parse errors are sentences") {
    CHECK(has(error_of([] { Einsum::parse("ik,kj,jl->il"); }, ErrorKind::parse), "exactly two"));
    CHECK(has(error_of([] { Einsum::parse("i1,kj->ij"); }, ErrorKind::parse), "one letter per dim"));
    CHECK(has(error_of([] { Einsum::parse("ik,kj->iz"); }, ErrorKind::parse), "output letter z"));
    CHECK(has(error_of([] { Einsum::parse("ii,ij->j"); }, ErrorKind::unsupported), "twice"));
    CHECK(has(error_of([] { Einsum::parse("ikx,kj->ij"); }, ErrorKind::unsupported), "only in A"));
    CHECK(has(error_of([] { Einsum::parse(",kj->j"); }, ErrorKind::parse), "no dims"));
  }

  TEST_CASE("sizes: read from shapes, checked for rank and agreement") {
    Einsum eq = Einsum::parse("ik,kj->ij");
    DimSizes s = eq.sizes({4, 16}, {16, 3});
    CHECK(s.at('i') == 4);
    CHECK(s.at('k') == 16);
    CHECK(s.at('j') == 3);
    CHECK(has(error_of([&] { eq.sizes({4, 16}, {15, 3}); }, ErrorKind::rank_mismatch), "size 16 in A but 15 in B"));
    CHECK(has(error_of([&] { eq.sizes({4, 16, 1}, {16, 3}); }, ErrorKind::rank_mismatch), "has shape [4, 16, 1]"));
  }

  TEST_CASE("parse_dim_sizes and shape_for") {
    DimSizes s = parse_dim_sizes("b=8, s=4,m=16,h=32");
    CHECK(shape_for("bsh", s) == Shape{8, 4, 32});
    CHECK(has(error_of([] { parse_dim_sizes("b8"); }, ErrorKind::parse), "letter=size"));
    CHECK(has(error_of([] { parse_dim_sizes("b=0"); }, ErrorKind::parse), "positive"));
    CHECK(has(error_of([&] { shape_for("bq", s); }, ErrorKind::parse), "no size for dim q"));
  }

  TEST_CASE("the article's dot product and 2x4 by 4x2 matmul") {
    // a = [1, 0, 2, -1], b = [-1, 2, 0, 2]: (1)(-1) + 0 + 0 + (-1)(2) = -3.
    const Tensor a = {1, 0, 2, -1}, b = {-1, 2, 0, 2};
    const Einsum dot = Einsum::parse("i,i->");
    CHECK(contract(dot, a, b)() == -3);
    CHECK(reference_einsum(dot, a, b)() == -3);
    const Tensor A = {{1, 0, 2, -1}, {2, 1, 0, -2}};
    const Tensor B = {{0, -1}, {1, 2}, {2, 0}, {0, 2}};
    const Tensor C = {{4, -3}, {1, -4}};
    CHECK(same(matmul(A, B), C));
    CHECK(same(reference_einsum(Einsum::parse("ik,kj->ij"), A, B), C));
  }

  TEST_CASE("contract equals plain loops for matmul, a transposed output and a transposed operand") {
    const Tensor a = random_integers({5, 7}, 1, -9, 9), b = random_integers({7, 3}, 2, -9, 9);
    const Tensor want = loop_matmul(a, b);
    CHECK(same(matmul(a, b), want));
    CHECK(same(contract(Einsum::parse("ik,kj->ji"), a, b), Tensor(xt::transpose(want))));
    const Tensor bt = xt::transpose(b);
    CHECK(same(contract(Einsum::parse("ik,jk->ij"), a, bt), want));
  }

  TEST_CASE("contract on the FFN shapes, a batched product and an outer product equals the reference") {
    struct Case { const char* eq; Shape a, b; };
    for (const Case& c : {Case{"bsm,mh->bsh", {4, 3, 8}, {8, 6}}, Case{"bsh,hm->bsm", {2, 3, 6}, {6, 4}},
                          Case{"bij,bjk->bik", {3, 2, 5}, {3, 5, 4}}, Case{"i,j->ij", {3}, {4}},
                          Case{"bqd,bkd->bqk", {2, 3, 4}, {2, 5, 4}}, Case{"mkn,kn->m", {3, 4, 5}, {4, 5}},
                          Case{"jb,ib->bij", {2, 3}, {4, 3}}}) {
      CAPTURE(c.eq);
      const Einsum eq = Einsum::parse(c.eq);
      const Tensor a = random_integers(c.a, 3, -5, 5), b = random_integers(c.b, 4, -5, 5);
      CHECK(same(contract(eq, a, b), reference_einsum(eq, a, b)));
    }
  }

  TEST_CASE("contract on the article's 4x16 by 16x4: by loops, and a wrong operand is caught") {
    const Tensor a = random_integers({4, 16}, 7, -4, 4), b = random_integers({16, 4}, 8, -4, 4);
    Tensor bad = b;
    bad(3, 2) += 1;
    CHECK(same(matmul(a, b), loop_matmul(a, b)));
    CHECK_FALSE(same(matmul(a, bad), loop_matmul(a, b)));
    CHECK(has(error_of([&] { matmul(a, Tensor(xt::zeros<double>(Shape{8, 4}))); }, ErrorKind::rank_mismatch),
              "size 16 in A but 8 in B"));
  }

  TEST_CASE("contraction_flops counts 2 per term: 2*m*k*n") {
    CHECK(contraction_flops(Einsum::parse("ik,kj->ij"), {4, 16}, {16, 4}) == 512);
    CHECK(contraction_flops(Einsum::parse("bsm,mh->bsh"), {8, 4, 16}, {16, 32}) == 2.0 * 8 * 4 * 16 * 32);
  }
}
