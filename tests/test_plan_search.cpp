// The planner's search (harness/plan/plan_search.cpp) against an independent brute-force enumerator
// (tests/brute_plans.hpp). The enumerator is checked on hand cases and against the articles'
// planner (it may only ever find fewer bytes); then the search must find exactly the enumerator's
// minimum, and its plans run and verify on the sim backend.
// Over 400 lines (429) as one idea: the search against one brute-force enumerator.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/random_cases.hpp"
#include "core/error.hpp"
#include "core/spec.hpp"
#include "harness/plan/planner.hpp"
#include "tests/brute_plans.hpp"
#include "tests/sanitized.hpp"

#include "collectives/runtime.hpp"
#include "core/layout.hpp"
#include "harness/cost/cost.hpp"
#include "harness/plan/natural.hpp"
#include "harness/plan/plan_search.hpp"
#include "harness/plan/search_text.hpp"
#include "harness/check/report.hpp"
#include "harness/check/plan_ledger.hpp"

using namespace shardlab;
using shardlab::testing::pick;
using shardlab::testing::random_mesh;
using shardlab::testing::random_spec;
using shardlab::testing::Rng;
using shardlab::testing::sanitized_share;

namespace {

// A matmul-shaped case: `mkn` are the sizes of i, k and j in "ik,kj->ij".
brute::Cheapest hand_case(const std::string& mesh, const std::string& a_spec, const std::string& b_spec,
                          const Shape& mkn, const std::string& out, std::size_t* article = nullptr) {
  const Mesh m = Mesh::parse(mesh);
  const Einsum eq = Einsum::parse("ik,kj->ij");
  const Operand a{"A", Spec::parse(a_spec), {mkn[0], mkn[1]}}, b{"B", Spec::parse(b_spec), {mkn[1], mkn[2]}};
  const auto c = brute::brute_cheapest(eq, m, a, b, Spec::parse(out), 8);
  REQUIRE(c.has_value());
  if (article) *article = plan_contraction(eq, m, a, b, Spec::parse(out)).predicted_bytes_per_device();
  return *c;
}

struct Case {
  Mesh mesh;
  Einsum eq;
  Operand a, b;
  std::optional<Spec> out;
  std::string text() const {
    std::ostringstream s;
    s << "mesh " << mesh.text() << ", " << eq.text() << ", A " << a.spec.text() << " " << shape_text(a.shape) << ", B "
      << b.spec.text() << " " << shape_text(b.shape) << ", out " << (out ? out->text() : "(article's)");
    return s.str();
  }
  static std::string shape_text(const Shape& s) {
    std::string t;
    for (auto n : s) t += (t.empty() ? "[" : "x") + std::to_string(n);
    return t + "]";
  }
};

Case random_case(Rng& rng) {
  static const char* meshes[] = {"4", "2x4", "2x2x2", "4x4"};
  static const char* einsums[] = {"ik,kj->ij",     "ki,kj->ij",     "ik,jk->ji",    "ij,jk->ik",     "bik,bkj->bij",
                                  "bik,bkj->ibj",  "ijk,kl->ijl",   "ijk,jk->i",    "ijk,kl->lij",   "ik,kjl->ijl"};
  Case c{Mesh::parse(meshes[pick(rng, 0, 3)]), Einsum::parse(einsums[pick(rng, 0, 9)]), {}, {}, std::nullopt};
  Spec sa = random_spec(rng, c.mesh, c.eq.a.size()), sb = random_spec(rng, c.mesh, c.eq.b.size());
  // Half the time B splits the shared dims as A does: independent specs rarely agree, and
  // agreement is what leaves partial sums in the product.
  if (pick(rng, 0, 1)) {
    for (char l : c.eq.batch() + c.eq.contracted()) {
      const auto& axes = sa.dims[c.eq.a.find(l)];
      for (auto& d : sb.dims)
        for (const auto& ax : axes) d.erase(std::remove(d.begin(), d.end(), ax), d.end());
      sb.dims[c.eq.b.find(l)] = axes;
    }
  }
  DimSizes sizes;
  for (char l : c.eq.a + c.eq.b) sizes[l] = 16 * static_cast<std::size_t>(pick(rng, 1, 2));
  c.a = {"A", sa, shape_for(c.eq.a, sizes)};
  c.b = {"B", sb, shape_for(c.eq.b, sizes)};
  if (pick(rng, 0, 2)) {
    Spec so = random_spec(rng, c.mesh, c.eq.out.size());
    // Sometimes ask to keep a partial sum over an axis the output dims leave free.
    if (pick(rng, 0, 3) == 0) {
      const auto used = so.used_axes();
      for (const auto& ax : c.mesh.names())
        if (std::find(used.begin(), used.end(), ax) == used.end()) {
          so.partial.push_back(ax);
          break;
        }
    }
    c.out = so;
  }
  return c;
}

}  // namespace

TEST_SUITE("plan search") {
  TEST_CASE("brute: hand cases, bytes per device worked out by hand") {
    std::size_t article = 0;
    SUBCASE("A _,_ and B X,_ on X=4, 8x128 by 128x128: slice A's k for free, AllReduce the 8x128 product") {
      // The product block is all of C, 8*128 float64 = 8192 B, partial over X; a ring AllReduce
      // over 4 devices sends 2*3/4 of it. (ReduceScatter then AllGather costs the same.)
      const auto c = hand_case("X=4", "_,_", "X,_", {8, 128, 128}, "_,_", &article);
      CAPTURE(brute::steps_text(c));
      CHECK(c.bytes == 2 * 3 * 8 * 128 * 8 / 4);  // 12288
      CHECK(article == 3 * 32 * 128 * 8);          // the article gathers B: 98304, 8x more
    }
    SUBCASE("A _,X and B _,_ on X=4, 8x64 by 64x4: slice B's k, then AllReduce or ReduceScatter") {
      // The partial product block is 8x4 = 256 B.
      auto c = hand_case("X=4", "_,X", "_,_", {8, 64, 4}, "_,_", &article);
      CAPTURE(brute::steps_text(c));
      CHECK(c.bytes == 2 * 3 * 256 / 4);  // AllReduce: 384
      CHECK(article == 3 * 8 * 16 * 8);   // the article gathers A's 8x16 block: 3072, 8x more
      c = hand_case("X=4", "_,X", "_,_", {8, 64, 4}, "X,_", &article);
      CAPTURE(brute::steps_text(c));
      CHECK(c.bytes == 3 * 256 / 4);      // ReduceScatter onto i: 192
      CHECK(article == 3 * 8 * 16 * 8);   // 3072, 16x more
    }
    SUBCASE("A _,X and B Y,_ on X=2,Y=4, 4x64 by 64x4: AllToAll B's Y onto j, slice k by X") {
      // B's block is 16x4 = 512 B; moving Y from k to j keeps a quarter of it: 3/4 * 512 = 384.
      // Then B is 64x1 under _,Y, sliced for free to X,Y (32x1), and A _,X multiplies with it:
      // the product C _,Y{X} is a 4x1 block, 32 B. AllReduce over X (n=2): 2*1/2*32 = 32.
      // AllGather j over Y: 3 * 32 = 96. Total 384 + 32 + 96 = 512.
      // (Gathering A over X, 1024, then slicing it by Y and all-reducing the 4x4 product over Y,
      // 192, is 1216; the article gathers both, 1024 + 3*512 = 2560.)
      const auto c = hand_case("X=2,Y=4", "_,X", "Y,_", {4, 64, 4}, "_,_", &article);
      CAPTURE(brute::steps_text(c));
      CHECK(c.bytes == 384 + 32 + 96);
      CHECK(article == 1024 + 3 * 512);
    }
    SUBCASE("A X,_ and B _,_ on X=4, 8x4 by 4x32, out _,_: gather A, not the product") {
      // A's block is 2x4 = 64 B: gathering it sends 3*64 = 192. Gathering the 2x32 product
      // block instead sends 3 * 512 = 1536, the article's plan.
      const auto c = hand_case("X=4", "X,_", "_,_", {8, 4, 32}, "_,_", &article);
      CAPTURE(brute::steps_text(c));
      CHECK(c.bytes == 3 * 2 * 4 * 8);  // 192
      CHECK(article == 3 * 2 * 32 * 8);  // 1536
    }
    SUBCASE("A X,_ and B _,_ on X=4, 8x8 by 8x8, out _,X: one AllToAll of the product") {
      // The product comes out X,_ with a 2x8 block, 128 B. AllToAll of X from i to j sends 3/4 of
      // it, 96 B. Gathering it (3*128 = 384) and slicing j costs 4x more, as does gathering A first.
      const auto c = hand_case("X=4", "X,_", "_,_", {8, 8, 8}, "_,X", &article);
      CAPTURE(brute::steps_text(c));
      CHECK(c.bytes == 3 * 128 / 4);  // 96
      CHECK(c.steps.back().rfind("all_to_all C over X dim 0->1", 0) == 0);
      CHECK(article == 3 * 128);  // 384
    }
    SUBCASE("mesh axes of size 1 move nothing") {
      // On X=1,Y=2 every spec with X is the same layout as without it.
      auto c = hand_case("X=1,Y=2", "X,_", "_,X", {8, 8, 8}, "_,_");
      CHECK(c.bytes == 0);
      c = hand_case("X=1,Y=2", "_,X", "_,_", {8, 8, 8}, "X,_");
      CHECK(c.bytes == 0);
      // A _,Y and B Y,_ leave an 8x8 product partial over Y, 512 B; AllReduce over 2: 512.
      // With X sprinkled in, or a partial sum over X requested, nothing changes.
      CHECK(hand_case("X=1,Y=2", "_,Y", "Y,_", {8, 8, 8}, "_,_").bytes == 512);
      CHECK(hand_case("X=1,Y=2", "_,(Y,X)", "(X,Y),_", {8, 8, 8}, "X,_").bytes == 512);
      CHECK(hand_case("X=1,Y=2", "X,Y", "Y,_", {8, 8, 8}, "_,_{X}").bytes == 512);
      // Keeping the partial sum over Y that the output asks for: nothing to send.
      CHECK(hand_case("X=1,Y=2", "X,Y", "Y,X", {8, 8, 8}, "_,_{Y}").bytes == 0);
    }
    SUBCASE("partial sums come only from contracted dims") {
      const Mesh m = Mesh::parse("X=4");
      // ik,kj->ij: A X,_ can AllToAll X onto k (3/4 of its 2x8 block, 96 B) and B slice k by X
      // for free; the product is then partial over X, as the output asks.
      Einsum eq = Einsum::parse("ik,kj->ij");
      Operand a{"A", Spec::parse("X,_"), {8, 8}}, b{"B", Spec::parse("_,_"), {8, 8}};
      CHECK(brute::brute_min_bytes(eq, m, a, b, Spec::parse("_,_{X}"), 8) == std::optional<std::size_t>(96));
      // With nothing contracted no product is ever partial: no plan reaches _,_{X}.
      eq = Einsum::parse("bi,bj->bij");
      a = {"A", Spec::parse("X,_"), {8, 8}};
      b = {"B", Spec::parse("_,_"), {8, 8}};
      CHECK_FALSE(brute::brute_min_bytes(eq, m, a, b, Spec::parse("_,_,_{X}"), 8).has_value());
      CHECK(brute::brute_min_bytes(eq, m, a, b, Spec::parse("X,_,_"), 8) == std::optional<std::size_t>(0));
    }
  }

  TEST_CASE("brute: never more bytes than the article's plan on 500+ random cases") {
    const auto start = std::chrono::steady_clock::now();
    Rng rng(20240612);
    int compared = 0, refused = 0, refused_reachable = 0, cheaper = 0, no_plan = 0;
    std::string examples;
    const int cases = sanitized_share(640, 8);  // tests/sanitized.hpp
    for (int i = 0; i < cases; ++i) {
      const Case c = random_case(rng);
      CAPTURE(c.text());
      std::optional<Plan> article;
      try {
        article = plan_contraction(c.eq, c.mesh, c.a, c.b, c.out);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::unsupported) throw;
        // The articles' rules cannot reach this output (a partial sum they do not make); count
        // the ones the move set can reach: the search has to find those.
        ++refused;
        refused_reachable += brute::brute_min_bytes(c.eq, c.mesh, c.a, c.b, *c.out, 8).has_value();
        continue;
      }
      const Spec target = c.out ? *c.out : article->out_spec;
      const auto brute = brute::brute_cheapest(c.eq, c.mesh, c.a, c.b, target, 8);
      if (!brute) {
        ++no_plan;
        FAIL_CHECK("the article reaches " << target.text() << " but the enumerator cannot: " << plan_summary(*article));
        continue;
      }
      const std::size_t art = article->predicted_bytes_per_device();
      CAPTURE(plan_summary(*article));
      CAPTURE(brute::steps_text(*brute));
      CHECK(brute->bytes <= art);
      ++compared;
      if (brute->bytes < art) {
        ++cheaper;
        if (cheaper <= 3)
          examples += "\n  " + c.text() + ": article " + std::to_string(art) + " B, brute " +
                      std::to_string(brute->bytes) + " B\n" + brute::steps_text(*brute);
      }
    }
    CHECK(compared >= cases * 25 / 32);  // 500 of 640
    CHECK(no_plan == 0);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::ostringstream m;
    m << compared << " random cases compared (" << refused << " refused by the article's planner, " << refused_reachable
      << " of them reachable), " << cheaper
      << " where the enumerator finds fewer bytes, " << static_cast<int>(ms) << " ms; first ones:" << examples;
    MESSAGE(m.str());
  }

  TEST_CASE("brute: search_contraction finds exactly the enumerator's minimum, and its plans verify") {
    Rng rng(20240612);
    int compared = 0, refused = 0, runs = 0;
    const int cases = sanitized_share(640, 8);  // tests/sanitized.hpp
    for (int i = 0; i < cases; ++i) {
      const Case c = random_case(rng);
      CAPTURE(c.text());
      std::optional<SearchResult> found;
      try {
        found = search_contraction(c.eq, c.mesh, c.a, c.b, c.out);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::unsupported) throw;
      }
      // Without an output spec the result takes its natural layout (natural.hpp), complete.
      const Spec natural = natural_output(c.eq, c.mesh, c.a.spec, c.b.spec, plan_contraction(c.eq, c.mesh, c.a, c.b).out_shape);
      const Spec target = c.out ? *c.out : found ? found->best.out_spec : natural;
      const auto brute = brute::brute_cheapest(c.eq, c.mesh, c.a, c.b, target, 8);
      if (!c.out && found) {
        const auto to_natural = brute::brute_cheapest(c.eq, c.mesh, c.a, c.b, natural, 8);
        REQUIRE(to_natural.has_value());
        CHECK(without_unit_axes(c.mesh, found->best.out_spec) == without_unit_axes(c.mesh, natural));
        CHECK(found->best.predicted_bytes_per_device() == to_natural->bytes);
        CHECK_FALSE(found->best.out_spec.is_partial());
      }
      if (!found) {
        CHECK_MESSAGE(!brute.has_value(), "the search refuses a reachable output; the enumerator's plan:\n"
                                              << (brute ? brute::steps_text(*brute) : ""));
        ++refused;
        continue;
      }
      const Plan& best = found->best;
      CAPTURE(plan_summary(best));
      REQUIRE_MESSAGE(brute.has_value(), "the search reaches " << best.out_spec.text() << " but the enumerator cannot");
      CAPTURE(brute::steps_text(*brute));
      CHECK(best.predicted_bytes_per_device() <= brute->bytes);
      CHECK(best.predicted_bytes_per_device() == brute->bytes);
      CHECK(brute::to_layout(c.mesh, best.out_spec) == brute::to_layout(c.mesh, target));
      if (compared++ % 10 != 0) continue;
      // Run the chosen plan on small integers: sums are exact, so the result must equal the
      // unsharded einsum bit for bit, and the ledger must match the plan step by step.
      const std::uint64_t seed = 1000 + 2 * static_cast<std::uint64_t>(i);  // leaves rng alone: same cases as above
      const Tensor ta = random_integers(c.a.shape, seed, -4, 4), tb = random_integers(c.b.shape, seed + 1, -4, 4);
      Runtime rt(Backend::sim);
      const RunResult r = rt.run(best.mesh, plan_spmd(best, ta, tb));
      std::vector<Tensor> blocks;
      for (const auto& o : r.outputs) blocks.push_back(o.at(best.result_name));
      const Assembly got = assemble(best.mesh, best.out_spec, best.out_shape, blocks, best.result_name);
      CHECK(got.replicas_agree);
      CHECK(got.tensor == reference_einsum(c.eq, ta, tb));
      CHECK(plan_vs_ledger(best, summarize(r.ledger)) == "");
      ++runs;
    }
    CHECK(compared >= cases * 25 / 32);  // 500 of 640
    CHECK(runs * 10 >= cases * 25 / 32);  // 50 of 640
    MESSAGE(compared << " random cases compared with the enumerator, " << runs << " of their plans run on the sim backend, "
                     << refused << " outputs refused by the search");
  }
}

TEST_CASE("cases_text: the articles' and the scaling book's names for pairs of layouts") {
  const Einsum eq = Einsum::parse("ik,kj->ij");
  const Mesh mesh = Mesh::parse("X=2,Y=4");
  auto at = [&](const char* a, const char* b) { return cases_text(eq, mesh, Spec::parse(a), Spec::parse(b)); };
  CHECK(at("_,Y", "Y,_") == "Case 1A; book case 3");                     // lesson 04
  CHECK(at("_,Y", "X,_") == "Case 1B; book case 2");                     // lesson 05: mismatch
  CHECK(at("_,Y", "_,_") == "Case 1B; book case 2");                     // one side split
  CHECK(at("X,_", "_,_") == "Case 2; book case 1");                      // outer only
  CHECK(at("X,_", "_,X") == "Case 2; book case 1 + 4");                  // both free dims on X
  CHECK(at("X,Y", "X,_") == "Case 1B + Case 2 (full sharding); book case 2");  // lesson 06
  CHECK(at("X,Y", "Y,X") == "Case 1A + Case 2 (full sharding); book case 3 + 4");
  CHECK(at("_,_", "_,_") == "nothing split; book case 1");
  // An axis of size 1 splits nothing.
  CHECK(cases_text(eq, Mesh::parse("X=1,Y=2"), Spec::parse("_,X"), Spec::parse("X,_")) == "nothing split; book case 1");
}

TEST_CASE("search --objective time: alpha-bound small tensors gather, bandwidth-bound large ones reduce") {
  // mesh X=4, A replicated [8, k], B [k, n] split over X on k, float32, TPU v4 (alpha 1 us,
  // 45 GB/s per link one way, reductions 450 GB/s, 275 TFLOP/s; an axis of 4 wraps, so a
  // collective uses both directions and needs ceil(4/2) = 2 hops: harness/cost/topology.hpp).
  const Einsum eq = Einsum::parse("ik,kj->ij");
  const Mesh mesh = Mesh::parse("X=4");
  const Hardware& v4 = hardware_preset("tpu-v4");
  auto plan_for = [&](std::size_t k, const Hardware* hw) {
    PlanOptions o{false, "C", 4};
    o.time_on = hw;
    return search_contraction(eq, mesh, {"A", Spec::parse("_,_"), {8, k}}, {"B", Spec::parse("X,_"), {k, k}},
                              Spec::parse("_,_"), o).best;
  };
  // k = 128. AllGather of B (n = 128*128*4 = 65536 B): 2 alpha + n 3/4 / (2 x 45e9) = 2.546 us.
  // Slice A and AllReduce C (n = 8*128*4 = 4096 B): 4 alpha + 2 n 3/4 / (2 x 45e9) + n 3/4 / 450e9
  // = 4.075 us.
  const Plan small = plan_for(128, &v4);
  REQUIRE(small.collectives().size() == 1);
  CHECK(small.collectives()[0]->kind == StepKind::all_gather);
  const double gather_us = 2.0 + 65536 * 0.75 / (2 * 45e9) * 1e6, flops_us = 2.0 * 8 * 128 * 128 / 275e12 * 1e6;
  CHECK(plan_objective(small, &v4) * 1e6 == doctest::Approx(gather_us + flops_us).epsilon(1e-9));
  CHECK(plan_for(128, nullptr).collectives()[0]->kind == StepKind::all_reduce);  // bytes: 6144 < 49152
  // k = 2048: gathering B moves 12 MiB, reducing C 48 KiB: time now agrees with bytes.
  const Plan large = plan_for(2048, &v4);
  REQUIRE(large.collectives().size() == 1);
  CHECK(large.collectives()[0]->kind == StepKind::all_reduce);
}

TEST_CASE("search: partial sums over a set of axes, in whatever order the output spec lists them") {
  // K split over (X,Y) in both: the product is partial over X and Y, which is what either order asks.
  const Einsum eq = Einsum::parse("ik,kj->ij");
  const Mesh mesh = Mesh::parse("X=2,Y=4");
  for (const char* out : {"_,_{X,Y}", "_,_{Y,X}"}) {
    CAPTURE(out);
    const SearchResult r = search_contraction(eq, mesh, {"A", Spec::parse("_,(X,Y)"), {4, 16}},
                                              {"B", Spec::parse("(X,Y),_"), {16, 4}}, Spec::parse(out), {false, "C", 4});
    CHECK(r.best.predicted_bytes_per_device() == 0);
    CHECK(r.best.collectives().empty());
  }
}

TEST_CASE("search: between plans of equal bytes and collectives, the one with fewer FLOPs per device") {
  // B's batch dim split over X=4, A replicated, C replicated (the natural output): slice A's batch
  // for free, multiply a quarter and gather C, or gather B and multiply everything on every device.
  // Both send 12288 B in one collective; the first computes 1/4 of the FLOPs (2*16^4/4). Found by running random cases
  // with and without FLOPs in the search's cost: without, the search kept 131072 FLOPs per device.
  const Einsum bmm = Einsum::parse("bik,bkj->bij");
  const SearchResult r = search_contraction(bmm, Mesh::parse("X=4"), {"A", Spec::parse("_,_,_"), {16, 16, 16}},
                                            {"B", Spec::parse("X,_,_"), {16, 16, 16}}, Spec::parse("_,_,_"),
                                            {false, "C", 4});
  CHECK(r.best.predicted_bytes_per_device() == 12288);
  CHECK(r.best.flops_per_device() == doctest::Approx(2.0 * 16 * 16 * 16 * 16 / 4));
  // The same on 2x2x2: 1024 B either way, 1024 FLOPs per device instead of 2048.
  const SearchResult m = search_contraction(Einsum::parse("ik,kj->ij"), Mesh::parse("X=2,Y=2,Z=2"),
                                            {"A", Spec::parse("Z,X"), {16, 16}}, {"B", Spec::parse("Y,(Z,X)"), {16, 16}},
                                            plan_contraction(Einsum::parse("ik,kj->ij"), Mesh::parse("X=2,Y=2,Z=2"),
                                                             {"A", Spec::parse("Z,X"), {16, 16}},
                                                             {"B", Spec::parse("Y,(Z,X)"), {16, 16}})
                                                .out_spec,
                                            {false, "C", 4});
  CHECK(m.best.predicted_bytes_per_device() == 1024);
  CHECK(m.best.flops_per_device() == doctest::Approx(1024));
}

TEST_CASE("search, no output spec: the result takes its natural layout; --out-spec auto the cheapest") {
  // einsum bmk,bkn->bmn on X=2,Y=4, A split over b by X, B replicated, b=4 m=8 k=16 n=16 float64.
  // Natural (DTensor's bmm strategy Shard(0), Shard(0) -> Shard(0), B's batches sliced for free):
  // C[B_X, M, N] for 0 B. The articles' rule 1 gathers A's b instead, leaving C replicated.
  // Auto: of the layouts costing 0, the one that splits the most dims, C[B_X, M_Y, N].
  const Mesh mesh = Mesh::parse("X=2,Y=4");
  const Einsum bmk = Einsum::parse("bmk,bkn->bmn");
  const Operand ba{"A", Spec::parse("X,_,_"), {4, 8, 16}}, bb{"B", Spec::parse("_,_,_"), {4, 16, 16}};
  const SearchResult bmm = search_contraction(bmk, mesh, ba, bb, std::nullopt, {false, "C", 8});
  CHECK(bmm.best.predicted_bytes_per_device() == 0);
  CHECK(bmm.best.out_spec == Spec::parse("X,_,_"));
  CHECK_FALSE(bmm.best.out_given);
  REQUIRE(bmm.article_output.has_value());
  CHECK(*bmm.article_output == Spec::parse("_,_,_"));
  CHECK(bmm.outputs.empty());
  const SearchResult cheap = search_cheapest_output(bmk, mesh, ba, bb, {false, "C", 8});
  CHECK(cheap.best.out_spec == Spec::parse("X,Y,_"));
  CHECK(cheap.best.predicted_bytes_per_device() == 0);
  CHECK(cheap.natural.out_spec == Spec::parse("X,_,_"));
  // Back to C[B_X, M, N]: AllGather the 2x2x16 block over Y, (4-1) x 64 x 8 B.
  CHECK(cheap.back_to_natural_bytes == 3 * 64 * 8);
  REQUIRE_FALSE(cheap.outputs.empty());
  CHECK(cheap.outputs.front().first == Spec::parse("X,Y,_"));
  const std::string why = outputs_text(cheap);
  CHECK(why.find("Why this output (--out-spec auto): C[B_X, M_Y, N] is the cheapest layout C can reach, 0 B") !=
        std::string::npos);
  CHECK(why.find("C[B_X, M, N]: 0 B (the natural output)") != std::string::npos);
  CHECK(why.find("sends 1536 B more per device to get it back") != std::string::npos);

  // matmul on X=4, A X,_ (4x8), B _,X (8x64), float64: both outer dims on X. Natural: A keeps
  // its split (article 001's rule), C[I_X, J]. Cheapest way there: gather B (3 x 8x16 x 8 B =
  // 3072 B), or gather A's 1x8 block (3 x 64 B = 192 B) and AllToAll C's 4x16 block (3/4 x 512 B
  // = 384 B): 576 B. Auto leaves C as B's columns split, _,X, for the 192 B.
  const Mesh x4 = Mesh::parse("X=4");
  const Einsum mm = Einsum::parse("ik,kj->ij");
  const Operand a{"A", Spec::parse("X,_"), {4, 8}}, b{"B", Spec::parse("_,X"), {8, 64}};
  const SearchResult n = search_contraction(mm, x4, a, b, std::nullopt, {false, "C", 8});
  CHECK(n.best.out_spec == Spec::parse("X,_"));
  CHECK(n.best.predicted_bytes_per_device() == 576);
  CHECK(n.article.predicted_bytes_per_device() == 3072);
  CHECK(n.article.out_spec == n.best.out_spec);  // compared like with like
  const SearchResult r = search_cheapest_output(mm, x4, a, b, {false, "C", 8});
  CHECK(r.best.predicted_bytes_per_device() == 192);
  CHECK(r.best.out_spec == Spec::parse("_,X"));
  CHECK(r.natural.predicted_bytes_per_device() == 576);
  // Every ranked output is complete and the list is cheapest first.
  for (std::size_t i = 0; i < r.outputs.size(); ++i) {
    CHECK_FALSE(r.outputs[i].first.is_partial());
    if (i) CHECK(r.outputs[i - 1].second <= r.outputs[i].second);
  }
  // An output spec given is kept, and no output ranking is made.
  CHECK(search_contraction(mm, x4, a, b, Spec::parse("X,_"), {false, "C", 8}).outputs.empty());
}
