// harness/plan/plan_execute.cpp: running a plan's steps on the sim backend. A gather's result is
// the whole tensor, compared with the tensor itself; a block of the wrong shape is refused.
#include <doctest/doctest.h>

#include <string>

#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "harness/plan/planner.hpp"

using namespace shardlab;

TEST_SUITE("planner") {
  TEST_CASE("execute_steps: gathering A over Y leaves every device the whole of A") {
    const Mesh mesh = Mesh::parse("X=2,Y=4");
    const Plan p = plan_contraction(Einsum::parse("ik,kj->ij"), mesh, {"A", Spec::parse("_,Y"), {4, 16}},
                                    {"B", Spec::parse("X,_"), {16, 4}});
    REQUIRE(p.steps.front().kind == StepKind::all_gather);
    const Tensor a = random_integers({4, 16}, 3, -4, 4);
    Runtime rt(Backend::sim);
    RunResult r = rt.run(mesh, [&](Device& dev) -> Outputs {
      return {{"A", execute_steps(dev, {p.steps.front()}, local_block(a, mesh, p.a.spec, dev.id()))}};
    });
    for (auto& o : r.outputs) CHECK(o.at("A") == a);
  }

  TEST_CASE("execute_plan refuses a block of the wrong shape") {
    const Mesh mesh = Mesh::parse("X=2,Y=4");
    const Plan p = plan_contraction(Einsum::parse("ik,kj->ij"), mesh, {"A", Spec::parse("_,Y"), {4, 16}},
                                    {"B", Spec::parse("Y,_"), {16, 4}});
    Runtime rt(Backend::sim);
    std::string what;
    try {
      rt.run(mesh, [&](Device& dev) -> Outputs {
        return {{"C", execute_plan(dev, p, Tensor(xt::zeros<double>(Shape{4, 16})), Tensor(xt::zeros<double>(Shape{4, 4})))}};
      });
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::rank_mismatch);
      what = e.what();
    }
    CHECK(what.find("spec _,Y gives it [4, 4]") != std::string::npos);
  }
}
