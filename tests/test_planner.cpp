// harness/plan/planner.cpp: the plans of article 001's cases and the GSPMD FFN, bytes from the ring
// formulas written out here, each run on the sim backend against the unsharded einsum, and errors.
// Printing a plan is tests/test_plan_text.cpp; running one with a wrong block, test_plan_execute.cpp.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "harness/plan/planner.hpp"
#include "harness/check/report.hpp"
#include "harness/check/plan_ledger.hpp"

using namespace shardlab;

namespace {
using Axes = std::vector<std::string>;

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

const Mesh kMesh = Mesh::parse("X=2,Y=4");
constexpr std::size_t kD = sizeof(double);

Plan matmul_plan(const std::string& a_spec, const std::string& b_spec, const std::string& out = "",
                 Shape mkn = {4, 16, 4}, const Mesh& mesh = kMesh) {
  std::optional<Spec> o;
  if (!out.empty()) o = Spec::parse(out);
  return plan_contraction(Einsum::parse("ik,kj->ij"), mesh, {"A", Spec::parse(a_spec), {mkn[0], mkn[1]}},
                          {"B", Spec::parse(b_spec), {mkn[1], mkn[2]}}, o);
}

// The communicating steps as "op tensor over axes dim d; ..." for compact comparisons.
std::string collectives_of(const Plan& p) {
  std::string out;
  for (const PlanStep* s : p.collectives())
    out += (out.empty() ? "" : "; ") + step_kind_name(s->kind) + " " + s->tensor + " over " + axes_text(s->axes) +
           " dim " + std::to_string(s->dim);
  return out;
}
std::vector<std::size_t> bytes_of(const Plan& p) {
  std::vector<std::size_t> out;
  for (const PlanStep* s : p.collectives()) out.push_back(s->predicted_bytes);
  return out;
}
using Sizes = std::vector<std::size_t>;

// Runs the plan on the sim backend; checks the result against the unsharded einsum and the
// ledger against the plan, step by step.
void run_and_check(const Plan& plan, std::uint64_t seed = 1) {
  const Tensor a = random_integers(plan.a.shape, seed, -4, 4), b = random_integers(plan.b.shape, seed + 1, -4, 4);
  Runtime rt(Backend::sim);
  RunResult r = rt.run(plan.mesh, plan_spmd(plan, a, b));
  std::vector<Tensor> blocks;
  for (auto& o : r.outputs) blocks.push_back(o.at(plan.result_name));
  Assembly got = assemble(plan.mesh, plan.out_spec, plan.out_shape, blocks, plan.result_name);
  CHECK(got.replicas_agree);
  CHECK(got.tensor == reference_einsum(plan.eq, a, b));  // integers: exact
  CHECK(plan_vs_ledger(plan, summarize(r.ledger)) == "");
}
}  // namespace

TEST_SUITE("planner") {
  TEST_CASE("Case 1A (lesson 04): A _,Y and B Y,_ multiply locally, then AllReduce C over Y") {
    Plan p = matmul_plan("_,Y", "Y,_");
    CHECK(collectives_of(p) == "all_reduce C over Y dim -1");
    CHECK(p.product.text() == "_,_{Y}");
    CHECK(p.out_spec.text() == "_,_");
    // AllReduce over 4 devices of the 4x4 product: 2(n-1)/n of 16 doubles.
    CHECK(bytes_of(p) == Sizes{2 * 3 * 16 * kD / 4});
    CHECK(p.flops_per_device() == 2 * 4 * 4 * 4);  // 4x4 by 4x4 blocks
    CHECK(p.unsharded_flops() == 2 * 4 * 16 * 4);
    run_and_check(p);
  }

  TEST_CASE("Case 1B (lesson 05): A _,Y and B X,_ gather A over Y and B over X, then multiply in full") {
    Plan p = matmul_plan("_,Y", "X,_");
    CHECK(collectives_of(p) == "all_gather A over Y dim 1; all_gather B over X dim 0");
    // A's block is 4x4 and 3 others arrive; B's block is 8x4 and 1 other arrives.
    CHECK(bytes_of(p) == Sizes{3 * 16 * kD, 1 * 32 * kD});
    CHECK(p.a_used.text() == "_,_");
    CHECK(p.b_used.text() == "_,_");
    CHECK(p.flops_per_device() == p.unsharded_flops());
    run_and_check(p);
  }

  TEST_CASE("Case 2 (lesson 06): A X,Y and B X,_ gather the inner axes; C comes out X,_") {
    Plan p = matmul_plan("X,Y", "X,_");
    CHECK(collectives_of(p) == "all_gather A over Y dim 1; all_gather B over X dim 0");
    CHECK(bytes_of(p) == Sizes{3 * 8 * kD, 1 * 32 * kD});
    CHECK(p.out_spec.text() == "X,_");
    CHECK(p.flops_per_device() == 2 * 2 * 16 * 4);
    run_and_check(p);
  }

  TEST_CASE("full sharding (lesson 07): A X,Y and B X,Y; each device a unique 2x1 block, C X,Y") {
    Plan p = matmul_plan("X,Y", "X,Y");
    CHECK(collectives_of(p) == "all_gather A over Y dim 1; all_gather B over X dim 0");
    CHECK(bytes_of(p) == Sizes{3 * 8 * kD, 1 * 8 * kD});
    CHECK(p.out_spec.text() == "X,Y");
    CHECK(local_shape(kMesh, p.out_spec, p.out_shape) == Shape{2, 1});
    CHECK(p.flops_per_device() * 8 == p.unsharded_flops());  // no duplicated work
    run_and_check(p);
  }

  TEST_CASE("the GSPMD FFN: AllGather x over Y, W_in over X; then W_out over X and ReduceScatter over Y") {
    const Mesh& m = kMesh;
    const Shape x_shape{8, 4, 16}, w_in{16, 32}, w_out{32, 16}, hidden{8, 4, 32};
    Plan up = plan_contraction(Einsum::parse("bsm,mh->bsh"), m, {"x", Spec::parse("X,_,Y"), x_shape},
                               {"W_in", Spec::parse("X,Y"), w_in}, Spec::parse("X,_,Y"), {false, "hidden"});
    CHECK(collectives_of(up) == "all_gather x over Y dim 2; all_gather W_in over X dim 0");
    // x's block [4,4,4] gathers 3 more; W_in's block [8,8] gathers 1 more.
    CHECK(bytes_of(up) == Sizes{3 * 64 * kD, 1 * 64 * kD});
    run_and_check(up);

    Plan down = plan_contraction(Einsum::parse("bsh,hm->bsm"), m, {"hidden", Spec::parse("X,_,Y"), hidden},
                                 {"W_out", Spec::parse("Y,X"), w_out}, Spec::parse("X,_,Y"), {false, "out"});
    CHECK(collectives_of(down) == "all_gather W_out over X dim 1; reduce_scatter out over Y dim 2");
    CHECK(down.product.text() == "X,_,_{Y}");
    // W_out's block [8,8] gathers 1 more; the partial product [4,4,16] keeps 1/4 of it.
    CHECK(bytes_of(down) == Sizes{1 * 64 * kD, 3 * 256 * kD / 4});
    run_and_check(down);

    // The other choice for the outer clash on X: gather the activations' batch instead.
    Plan other = plan_contraction(Einsum::parse("bsh,hm->bsm"), m, {"hidden", Spec::parse("X,_,Y"), hidden},
                                  {"W_out", Spec::parse("Y,X"), w_out}, Spec::parse("X,_,Y"), {true, "out"});
    CHECK(has(collectives_of(other), "all_gather hidden over X dim 0"));
    run_and_check(other);
  }

  TEST_CASE("output specs: ReduceScatter, a free slice before it, keeping the partial sum, gathering C") {
    CHECK(collectives_of(matmul_plan("_,Y", "Y,_", "_,Y")) == "reduce_scatter C over Y dim 1");
    CHECK(collectives_of(matmul_plan("_,Y", "Y,_", "Y,_")) == "reduce_scatter C over Y dim 0");
    Plan sliced = matmul_plan("_,Y", "Y,_", "X,Y");
    REQUIRE(sliced.steps.size() == 3);
    CHECK(sliced.steps[1].kind == StepKind::local_slice);  // rows over X first: free
    CHECK(sliced.steps[1].axes == Axes{"X"});
    CHECK(collectives_of(sliced) == "reduce_scatter C over Y dim 1");
    CHECK(bytes_of(sliced) == Sizes{3 * 8 * kD / 4});  // on the 2x4 slice, not the 4x4 product
    run_and_check(sliced);
    Plan kept = matmul_plan("_,Y", "Y,_", "_,_{Y}");
    CHECK(kept.collectives().empty());
    run_and_check(kept);
    Plan gathered = matmul_plan("X,Y", "X,Y", "_,_");
    CHECK(collectives_of(gathered) ==
          "all_gather A over Y dim 1; all_gather B over X dim 0; all_gather C over X dim 0; all_gather C over Y dim 1");
    run_and_check(gathered);
    Plan both = matmul_plan("_,(X,Y)", "(X,Y),_", "(Y,X),_", {8, 16, 4});
    CHECK(collectives_of(both) == "reduce_scatter C over Y,X dim 0");
    run_and_check(both);
  }

  TEST_CASE("multi-axis dims gather only a trailing part of their axis list") {
    Plan p = matmul_plan("_,(X,Y)", "X,_", "", {4, 16, 4});
    CHECK(collectives_of(p) == "all_gather A over Y dim 1; all_reduce C over X dim -1");  // keeps X, shared with B
    CHECK(p.product.text() == "_,_{X}");
    run_and_check(p);
    Plan q = matmul_plan("_,(Y,X)", "X,_");  // X is not A's leading axis: gather both of A's
    CHECK(collectives_of(q) == "all_gather A over Y,X dim 1; all_gather B over X dim 0");
    run_and_check(q);
  }

  TEST_CASE("batch dims, rank-1 and rank-3 meshes, and the dot product") {
    Plan bmm = plan_contraction(Einsum::parse("bij,bjk->bik"), Mesh::parse("X=2,Y=2,Z=2"),
                                {"A", Spec::parse("X,Y,Z"), {4, 4, 4}}, {"B", Spec::parse("X,Z,Y"), {4, 4, 4}});
    CHECK(collectives_of(bmm) == "all_gather B over Y dim 2; all_reduce C over Z dim -1");  // j agrees on Z; k clashes with A's i on Y
    CHECK(bmm.out_spec.text() == "X,Y,_");
    run_and_check(bmm);
    Plan dot = plan_contraction(Einsum::parse("i,i->"), Mesh::parse("X=2"), {"a", Spec::parse("X"), {4}},
                                {"b", Spec::parse("X"), {4}}, std::nullopt, {false, "c"});
    CHECK(collectives_of(dot) == "all_reduce c over X dim -1");
    run_and_check(dot);
    Plan mixed = plan_contraction(Einsum::parse("bj,ib->bij"), Mesh::parse("X=2,Y=4"),
                                  {"A", Spec::parse("Y,X"), {4, 2}}, {"B", Spec::parse("_,_"), {8, 4}});
    CHECK(collectives_of(mixed) == "all_gather A over Y dim 0");
    run_and_check(mixed);
  }

  TEST_CASE("plan_vs_ledger reports a wrong op, a wrong byte count and a missing call") {
    Plan p = matmul_plan("_,Y", "X,_");
    std::vector<CollectiveSummary> run(2);
    run[0].op = "all_gather", run[0].tensor = "A", run[0].axes = "Y", run[0].bytes_per_device = 384;
    run[1].op = "all_gather", run[1].tensor = "B", run[1].axes = "X", run[1].bytes_per_device = 256;
    CHECK(plan_vs_ledger(p, run) == "");
    run[1].bytes_per_device = 255;
    CHECK(has(plan_vs_ledger(p, run), "sent 255 bytes per device; the plan predicted 256"));
    run[1].op = "all_reduce";
    CHECK(has(plan_vs_ledger(p, run), "the run did all_reduce of B over X"));
    run.pop_back();
    CHECK(has(plan_vs_ledger(p, run), "the plan has 2 collectives, the run made 1"));
  }

  TEST_CASE("specs that cannot be planned are sentences naming the tensor, axis and sizes") {
    CHECK(has(error_of([] { matmul_plan("_,Z", "Y,_"); }, ErrorKind::unknown_axis), "names mesh axis Z"));
    CHECK(has(error_of([] { matmul_plan("Y,Y", "Y,_"); }, ErrorKind::duplicate_axis), "twice"));
    CHECK(has(error_of([] { matmul_plan("_,Y", "Y,_", "", {4, 6, 4}); }, ErrorKind::not_divisible),
              "dim 1 of A (size 6) is not divisible by mesh axis Y (size 4)"));
    CHECK(has(error_of([] { matmul_plan("_,Y,_", "Y,_"); }, ErrorKind::rank_mismatch), "einsum gives A 2 dims"));
    CHECK(has(error_of([] { matmul_plan("_,Y", "Y,_", "_"); }, ErrorKind::rank_mismatch), "output spec _ has 1"));
    CHECK(has(error_of([] { matmul_plan("_,Y", "Y,_", "_,_{X}"); }, ErrorKind::unsupported), "partial over Y"));
    CHECK(has(error_of([] { matmul_plan("_,Y{X}", "Y,_"); }, ErrorKind::unsupported), "reduce A first"));
    CHECK(has(error_of([] { matmul_plan("_,_", "_,_", "Y,Y"); }, ErrorKind::duplicate_axis), "of C uses mesh axis Y"));
    CHECK(has(error_of(
                  [] {
                    plan_contraction(Einsum::parse("ik,kj->ij"), kMesh, {"A", Spec::parse("_,_"), {4, 16}},
                                     {"A", Spec::parse("_,_"), {16, 4}});
                  },
                  ErrorKind::parse),
              "names must differ"));
  }
}
