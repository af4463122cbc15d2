// harness/plan/planner.cpp, property test: hundreds of random contractions on random meshes (rank 1-3,
// up to 8 devices) with random valid specs run on the sim backend. Each result must equal the
// unsharded reference einsum within the summation bound, and each collective of the ledger must
// be the plan's step with exactly the bytes it predicted. Random invalid specs must raise
// shardlab::Error, never anything else.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <xtensor/xmath.hpp>
#include <xtensor/xsort.hpp>

#include "tests/random_cases.hpp"
#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "harness/plan/planner.hpp"
#include "harness/check/report.hpp"
#include "harness/check/verify.hpp"
#include "harness/check/plan_ledger.hpp"

using namespace shardlab;
using shardlab::testing::pick;
using shardlab::testing::random_mesh;
using shardlab::testing::random_spec;
using shardlab::testing::Rng;

namespace {

// Letters: some batch, contracted and free ones; each operand has at least one dim.
Einsum random_einsum(Rng& rng) {
  std::string pool = "abcdefgh", a, b, out;
  std::shuffle(pool.begin(), pool.end(), rng);
  std::size_t next = 0;
  auto take = [&](int n) { std::string s = pool.substr(next, n); next += n; return s; };
  const std::string bat = take(pick(rng, 0, 1)), con = take(pick(rng, 0, 2));
  const std::string fa = take(pick(rng, bat.empty() && con.empty() ? 1 : 0, 2));
  const std::string fb = take(pick(rng, bat.empty() && con.empty() ? 1 : 0, 2));
  a = bat + con + fa;
  b = bat + con + fb;
  out = bat + fa + fb;
  std::shuffle(a.begin(), a.end(), rng);
  std::shuffle(b.begin(), b.end(), rng);
  std::shuffle(out.begin(), out.end(), rng);
  return Einsum::parse(a + "," + b + "->" + out);
}

// Each letter's size: a multiple of every shard count any spec asks of it, kept small.
DimSizes sizes_for(Rng& rng, const Mesh& mesh, const Einsum& eq, const std::vector<std::pair<std::string, Spec>>& specs) {
  std::map<char, std::size_t> need;
  for (const auto& [letters, spec] : specs)
    for (std::size_t i = 0; i < letters.size(); ++i)
      need[letters[i]] = std::lcm(need.count(letters[i]) ? need[letters[i]] : 1,
                                  static_cast<std::size_t>(spec.shards(mesh, i)));
  DimSizes s;
  for (char c : eq.a + eq.b) s[c] = (need.count(c) ? need[c] : 1) * static_cast<std::size_t>(pick(rng, 1, 2));
  return s;
}

struct Tally {
  int cases = 0, with_out = 0, kept_partial = 0, steps = 0;
  std::map<std::string, int> ops;
};

void run_valid_case(Rng& rng, Tally& tally) {
  const Mesh mesh = random_mesh(rng);
  const Einsum eq = random_einsum(rng);
  const Spec sa = random_spec(rng, mesh, eq.a.size());
  Spec sb = random_spec(rng, mesh, eq.b.size());
  // Half the time B splits the dims it shares with A exactly as A does (Case 1A and its kin);
  // independent random specs rarely agree, and agreement is what leaves partial sums to reduce.
  if (pick(rng, 0, 1)) {
    for (char c : eq.contracted() + eq.batch()) {
      const auto& axes = sa.dims[eq.a.find(c)];
      for (auto& d : sb.dims)
        for (const auto& ax : axes) d.erase(std::remove(d.begin(), d.end(), ax), d.end());
      sb.dims[eq.b.find(c)] = axes;
    }
  }
  std::optional<Spec> so;
  if (pick(rng, 0, 1)) so = random_spec(rng, mesh, eq.out.size());
  std::vector<std::pair<std::string, Spec>> specs = {{eq.a, sa}, {eq.b, sb}};
  if (so) specs.push_back({eq.out, *so});
  const DimSizes sizes = sizes_for(rng, mesh, eq, specs);
  const Operand a{"A", sa, shape_for(eq.a, sizes)}, b{"B", sb, shape_for(eq.b, sizes)};
  const PlanOptions opt{pick(rng, 0, 3) == 0, "C"};
  Plan plan = plan_contraction(eq, mesh, a, b, so, opt);
  // Sometimes keep one of the product's partial sums that the output spec leaves free.
  if (so && plan.product.is_partial() && pick(rng, 0, 2) == 0) {
    Spec keep = *so;
    keep.partial.push_back(plan.product.partial[0]);
    bool free_axis = true;
    for (const auto& d : keep.dims) free_axis = free_axis && std::find(d.begin(), d.end(), keep.partial[0]) == d.end();
    if (free_axis) {
      plan = plan_contraction(eq, mesh, a, b, keep, opt);
      ++tally.kept_partial;
    }
  }
  CAPTURE(mesh.text());
  CAPTURE(eq.text());
  CAPTURE(sa.text());
  CAPTURE(sb.text());
  CAPTURE(plan.out_spec.text());
  CAPTURE(plan_summary(plan));

  const bool integers = pick(rng, 0, 1);
  const std::uint64_t seed = rng();
  const Tensor ta = integers ? random_integers(a.shape, seed, -5, 5) : random_uniform(a.shape, seed, -1, 1);
  const Tensor tb = integers ? random_integers(b.shape, seed + 1, -5, 5) : random_uniform(b.shape, seed + 1, -1, 1);
  Runtime rt(Backend::sim);
  const RunResult r = rt.run(mesh, plan_spmd(plan, ta, tb));
  std::vector<Tensor> blocks;
  for (const auto& o : r.outputs) blocks.push_back(o.at("C"));
  const Assembly got = assemble(mesh, plan.out_spec, plan.out_shape, blocks, "C");
  const Tensor want = reference_einsum(eq, ta, tb);
  std::size_t terms = 1;
  for (char c : eq.contracted()) terms *= sizes.at(c);
  // However the sharded run groups them (local sums, ring sums, assemble() adding kept partial
  // blocks), each output element is a sum of the same `terms` products: the bound applies.
  const double tol = reduction_tolerance(terms, xt::amax(xt::abs(ta))() * xt::amax(xt::abs(tb))());
  const Verdict v = compare("C", got.tensor, want, tol);
  CHECK_MESSAGE(v.pass, v.line());
  CHECK(got.replicas_agree);
  CHECK(plan_vs_ledger(plan, summarize(r.ledger)) == "");

  ++tally.cases;
  tally.with_out += so.has_value();
  for (const auto& s : plan.steps)
    if (s.kind != StepKind::contract) ++tally.ops[step_kind_name(s.kind)];
  tally.steps += static_cast<int>(plan.steps.size());
}

// A spec text with one thing wrong, of a kind chosen at random.
std::string broken_spec(Rng& rng, const Mesh& mesh, std::size_t rank, int kind) {
  std::vector<std::string> e(rank, "_");
  const std::string ax = mesh.names()[pick(rng, 0, mesh.rank() - 1)];
  switch (kind) {
    case 0: e[pick(rng, 0, static_cast<int>(rank) - 1)] = "Q"; break;            // unknown axis
    case 1: e[0] = ax; e.push_back(ax); break;                                     // rank + 1 (and maybe twice)
    case 2: if (rank > 1) { e[0] = ax; e[1] = ax; } else e[0] = "(" + ax + "," + ax + ")"; break;  // twice
    case 3: e[0] = "(" + ax; break;                                                // malformed
    case 4: {  // an input carrying partial sums
      std::string t;
      for (std::size_t i = 0; i < rank; ++i) t += i ? ",_" : "_";
      return t + "{" + ax + "}";
    }
    default: e.pop_back(); break;                                                  // rank - 1
  }
  std::string s;
  for (std::size_t i = 0; i < e.size(); ++i) s += (i ? "," : "") + e[i];
  return s;
}

}  // namespace

TEST_SUITE("planner") {
  TEST_CASE("planner property: 600 random contractions on the sim backend equal the unsharded einsum") {
    Rng rng(20221010);
    Tally t;
    for (int i = 0; i < 600; ++i) run_valid_case(rng, t);
    CHECK(t.cases == 600);
    // The random cases must exercise every kind of step, or the property says little.
    CHECK(t.ops["all_gather"] > 50);
    CHECK(t.ops["all_reduce"] > 50);
    CHECK(t.ops["reduce_scatter"] > 20);
    CHECK(t.ops["local_slice"] > 20);
    CHECK(t.kept_partial > 5);
    std::ostringstream m;
    m << t.cases << " cases (" << t.with_out << " with an output spec, " << t.kept_partial << " keeping a partial sum), "
      << t.steps << " steps: ";
    for (const auto& kv : t.ops) m << kv.first << " x" << kv.second << " ";
    MESSAGE(m.str());
  }

  TEST_CASE("planner property: 300 random invalid specs give shardlab::Error, never a crash") {
    Rng rng(7);
    int errors = 0;
    std::map<int, int> by_kind;
    for (int i = 0; i < 300; ++i) {
      const Mesh mesh = random_mesh(rng);
      const Einsum eq = random_einsum(rng);
      const int kind = pick(rng, 0, 6);
      // kind 6: a valid spec on shapes that do not divide (every size 1 below a sharded axis > 1).
      std::string a_text = kind == 6 ? random_spec(rng, mesh, eq.a.size()).text() : broken_spec(rng, mesh, eq.a.size(), kind);
      if (kind == 6) {
        Spec s = Spec::parse(a_text);
        bool splits = false;
        for (std::size_t d = 0; d < s.rank(); ++d) splits = splits || s.shards(mesh, d) > 1;
        if (!splits) a_text = broken_spec(rng, mesh, eq.a.size(), 0);
      }
      CAPTURE(mesh.text());
      CAPTURE(eq.text());
      CAPTURE(a_text);
      try {
        Shape ones_a(eq.a.size(), 1), ones_b(eq.b.size(), 1);
        plan_contraction(eq, mesh, {"A", Spec::parse(a_text), ones_a}, {"B", Spec::replicated(eq.b.size()), ones_b});
        FAIL("planned an invalid spec");
      } catch (const Error& e) {
        ++errors;
        ++by_kind[static_cast<int>(e.kind())];
        CHECK(std::string(e.what()).size() > 20);
      } catch (const std::exception& e) {
        FAIL("not a shardlab::Error: " << e.what());
      }
    }
    CHECK(errors == 300);
    CHECK(by_kind.size() >= 5);  // parse, unknown_axis, duplicate_axis, not_divisible, rank_mismatch, unsupported
    std::ostringstream m;
    m << errors << " invalid specs, all shardlab::Error; by kind:";
    static const char* kind_names[] = {"parse",    "unknown_axis", "duplicate_axis", "not_divisible", "rank_mismatch",
                                       "world_size", "mismatch",   "io",             "unsupported",   "device"};
    for (const auto& kv : by_kind) m << " " << kind_names[kv.first] << "=" << kv.second;
    MESSAGE(m.str());
  }
}
