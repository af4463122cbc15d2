// harness/plan/plan_assembly.cpp: the search's moves turned into plan steps. One move by hand (its
// bytes from the ring formula written here, its reason), and the plans the search assembles for
// its rejected alternatives: each operand's steps chain, and the bytes add up to the plan's.
#include <doctest/doctest.h>

#include "harness/plan/plan_assembly.hpp"
#include "harness/plan/plan_search.hpp"

using namespace shardlab;

TEST_SUITE("planner") {
  TEST_CASE("step_of: gathering A [4, 16] over Y=4 sends 3/4 of its 512 bytes, and says so") {
    const Mesh mesh = Mesh::parse("X=2,Y=4");
    const search_detail::Subject t{mesh, {4, 16}, 8};
    search_detail::Move m;
    m.kind = StepKind::all_gather, m.axes = {"Y"}, m.dim = 1, m.after = Spec::parse("_,_");
    Spec cur = Spec::parse("_,Y");
    const PlanStep s = search_detail::step_of(t, mesh, m, cur, 0, "A", "ik");
    CHECK(s.predicted_bytes == 4 * 16 * 8 * 3 / 4);  // ring all_gather: (p-1)/p of the whole
    CHECK(s.reason == "gather dim K over Y");
    CHECK(s.local_before == Shape{4, 4});
    CHECK(s.local_after == Shape{4, 16});
    CHECK(cur == Spec::parse("_,_"));
  }

  TEST_CASE("assembled alternatives: steps chain per operand, one contraction, bytes add up") {
    // One of bench plan's random cases, which has rejected alternatives.
    const Mesh mesh = Mesh::parse("W=2,X=2,Y=2,Z=2");
    const SearchResult r = search_contraction(Einsum::parse("ik,kj->ij"), mesh, {"A", Spec::parse("Z,Y"), {256, 256}},
                                              {"B", Spec::parse("(Y,W),_"), {256, 256}}, std::nullopt,
                                              PlanOptions{false, "C", 4});
    REQUIRE(!r.alternatives.empty());
    for (const Plan& p : r.alternatives) {
      Spec at[3] = {without_unit_axes(mesh, p.a.spec), without_unit_axes(mesh, p.b.spec), p.product};
      int contractions = 0;
      std::size_t bytes = 0;
      for (const PlanStep& s : p.steps) {
        if (s.kind == StepKind::contract) {
          ++contractions;
          CHECK(s.reason.rfind("local product", 0) == 0);
          continue;
        }
        CHECK(s.before == at[s.operand]);
        at[s.operand] = s.after;
        bytes += s.predicted_bytes;
      }
      CHECK(contractions == 1);
      CHECK(at[2] == without_unit_axes(mesh, p.out_spec));
      CHECK(bytes == p.predicted_bytes_per_device());
    }
  }
}
