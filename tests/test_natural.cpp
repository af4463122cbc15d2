// The natural output (harness/plan/natural.hpp): the frameworks' answers for textbook cases, and
// the same layout propagate.hpp's rule 3 gives an einsum inside a program.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "core/einsum.hpp"
#include "core/error.hpp"
#include "core/mesh.hpp"
#include "core/spec.hpp"
#include "harness/plan/natural.hpp"
#include "harness/plan/propagate.hpp"
#include "tests/random_cases.hpp"

using namespace shardlab;

namespace {

Spec natural(const std::string& eq, const std::string& mesh, const std::string& a, const std::string& b,
             const Shape& out, bool keep_b = false) {
  return natural_output(Einsum::parse(eq), Mesh::parse(mesh), Spec::parse(a), Spec::parse(b), out, keep_b);
}

}  // namespace

TEST_CASE("natural output: the layouts JAX and DTensor give") {
  // Article 001's Case 1A, the scaling book's case 3: local products, AllReduce, C replicated.
  CHECK(natural("ik,kj->ij", "X=2,Y=4", "_,X", "X,_", {8, 8}) == Spec::parse("_,_"));
  // Book case 2 (one contracting dim split): AllGather A, C replicated.
  CHECK(natural("ik,kj->ij", "X=2,Y=4", "_,X", "_,_", {8, 8}) == Spec::parse("_,_"));
  // Book case 1 (only free dims split): C keeps them, no communication.
  CHECK(natural("ik,kj->ij", "X=2,Y=4", "_,_", "_,Y", {8, 8}) == Spec::parse("_,Y"));
  CHECK(natural("ik,kj->ij", "X=2,Y=4", "X,_", "_,Y", {8, 8}) == Spec::parse("X,Y"));
  // Book case 4 (a free dim of each on one axis): A keeps it, B gathers; --outer-gather A: B keeps.
  CHECK(natural("ik,kj->ij", "X=4", "X,_", "_,X", {8, 8}) == Spec::parse("X,_"));
  CHECK(natural("ik,kj->ij", "X=4", "X,_", "_,X", {8, 8}, true) == Spec::parse("_,X"));
  // DTensor's bmm: Shard(b) in both, or in one (the other's batches are sliced for free).
  CHECK(natural("bmk,bkn->bmn", "X=2,Y=4", "X,_,_", "X,_,_", {4, 8, 8}) == Spec::parse("X,_,_"));
  CHECK(natural("bmk,bkn->bmn", "X=2,Y=4", "_,_,_", "X,_,_", {4, 8, 8}) == Spec::parse("X,_,_"));
  // A 2D split of one free dim keeps both axes, in order.
  CHECK(natural("bsm,mh->bsh", "X=2,Y=4", "(X,Y),_,_", "_,_", {8, 4, 8}) == Spec::parse("(X,Y),_,_"));
  // Megatron's column-parallel layer: W_in split over its output columns, h keeps the split.
  CHECK(natural("bsm,mh->bsh", "Y=4", "_,_,_", "_,Y", {2, 4, 16}) == Spec::parse("_,_,Y"));
  // An axis that does not divide its dim is dropped on an even mesh, kept on a chunked one.
  CHECK(natural("ik,kj->ij", "X=4", "X,_", "_,_", {6, 8}) == Spec::parse("_,_"));
  Mesh chunked = Mesh::parse("X=4");
  chunked.set_uneven(Uneven::chunk);
  CHECK(natural_output(Einsum::parse("ik,kj->ij"), chunked, Spec::parse("X,_"), Spec::parse("_,_"), {6, 8}) ==
        Spec::parse("X,_"));
}

TEST_CASE("natural output: the same layout propagation gives an einsum inside a program") {
  using namespace shardlab::testing;
  Rng rng(7);
  const char* eqs[] = {"ik,kj->ij", "bmk,bkn->bmn", "bsm,mh->bsh", "bsnd,btnd->bnst", "ki,kj->ij"};
  int compared = 0;
  for (int i = 0; i < 400; ++i) {
    const Mesh mesh = random_mesh(rng);
    const Einsum eq = Einsum::parse(eqs[i % 5]);
    const Spec a = random_spec(rng, mesh, eq.a.size()), b = random_spec(rng, mesh, eq.b.size());
    TensorProgram p;
    p.name = "one";
    for (char c : eq.a + eq.b) p.sizes[c] = 24;  // every split on these meshes (at most 8 ways) divides 24
    p.inputs = {{"A", eq.a}, {"B", eq.b}};
    ProgramOp op;
    op.out = "C";
    op.name = "einsum";
    op.kind = OpKind::einsum;
    op.in = {"A", "B"};
    op.eq = eq.text();
    p.ops = {op};
    p.outputs = {"C"};
    p.dims = {{"A", eq.a}, {"B", eq.b}, {"C", eq.out}};
    CAPTURE(mesh.text());
    CAPTURE(eq.text());
    CAPTURE(a.text());
    CAPTURE(b.text());
    Propagation prop;
    try {
      prop = propagate(p, mesh, {{"A", a.text()}, {"B", b.text()}});
    } catch (const Error&) {
      continue;
    }
    ++compared;
    CHECK(prop.specs.at("C").spec == natural_output(eq, mesh, a, b, p.shape("C")));
  }
  CHECK(compared > 300);
}
