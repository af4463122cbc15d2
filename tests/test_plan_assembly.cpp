// harness/plan/plan_assembly.cpp: the search's moves turned into plan steps. One move by hand (its
// bytes from the ring formula written here, its reason), and the plans the search assembles for
// its rejected alternatives: each operand's steps chain, and the bytes add up to the plan's.
#include <doctest/doctest.h>

#include <algorithm>

#include "core/error.hpp"
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

// harness/plan/layout_code.cpp (kept here: a new test file would regroup every test unit of the
// build): packed layouts compare as their letter strings do ('a' + axis per mesh axis of each dim,
// '|' after each dim, '#', the partial axes), the order the search breaks ties by.
TEST_SUITE("planner") {
  TEST_CASE("layout codes: order of the letter strings, round trip, partial axes sorted in the key") {
    using namespace search_detail;
    std::vector<Lay> lays;
    std::vector<std::string> texts;
    unsigned seed = 7;
    auto next = [&](unsigned n) { return (seed = seed * 1103515245u + 12345u) / 65536u % n; };
    for (int i = 0; i < 300; ++i) {
      Lay l;
      l.dims.resize(1 + next(4));
      for (int axis = 0; axis < 6; ++axis) {
        const unsigned where = next(unsigned(l.dims.size()) + 2);  // a dim, partial, or unused
        if (where < l.dims.size()) l.dims[where].push_back(axis);
        else if (where == l.dims.size()) l.partial.push_back(axis);
      }
      std::reverse(l.partial.begin(), l.partial.end());
      std::string text, partial;
      for (const auto& d : l.dims) {
        for (auto a : d) text += char('a' + a);
        text += '|';
      }
      for (auto a : l.partial) partial += char('a' + a);
      std::sort(partial.begin(), partial.end());
      lays.push_back(l);
      texts.push_back(text + "#" + partial);
    }
    for (std::size_t i = 0; i < lays.size(); ++i) {
      Lay back;
      decode(encode(lays[i]), back);
      CHECK(back.dims == lays[i].dims);
      CHECK(back.partial == lays[i].partial);
      CHECK(key_of_code(encode(lays[i])) == encode(lays[i], true));
      for (std::size_t j = 0; j < lays.size(); ++j)
        CHECK((encode(lays[i], true) < encode(lays[j], true)) == (texts[i] < texts[j]));
    }
  }

  TEST_CASE("layout codes: a layout of more than 32 dims and axes is refused, not cut") {
    search_detail::Lay l;
    l.dims.resize(31);  // 31 bars and '#': 32 symbols fit
    CHECK_NOTHROW(search_detail::encode(l));
    l.dims[0].push_back(0);
    CHECK_THROWS_AS(search_detail::encode(l), Error);
  }
}
