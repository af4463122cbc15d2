// harness/cli/contraction_report.cpp: what shardlab matmul and einsum say about a plan before it
// runs. Blocks cut unevenly are listed, and nothing is said when every dim divides; --plan-only's
// report lists the plan's collectives with their bytes, and a run's report lists none as planned.
#include <doctest/doctest.h>

#include <sstream>
#include <string>

#include "core/mesh.hpp"
#include "harness/cli/contraction_report.hpp"

using namespace shardlab;

namespace {
// Case 1B of article 001 (A _,Y and B X,_ on X=2,Y=4, 4x16 by 16x4), with the rows of A given.
struct Case {
  Mesh mesh = Mesh::parse("X=2,Y=4");
  Contraction c;
  Plan plan;
  explicit Case(std::size_t rows, Uneven uneven = Uneven::none) {
    mesh.set_uneven(uneven);
    c.eq = Einsum::parse("ik,kj->ij");
    c.a = Operand{"A", Spec::parse("Y,_"), Shape{rows, 16}};
    c.b = Operand{"B", Spec::parse("X,_"), Shape{16, 4}};
    c.result = "C";
    plan = plan_contraction(c.eq, mesh, c.a, c.b, std::nullopt, c.options);
  }
};
}  // namespace

TEST_SUITE("contraction_report") {
  TEST_CASE("print_uneven: silent when every dim divides its axes; else each block's rows and the rule") {
    std::ostringstream out;
    Report rep;
    const Case even(8);
    print_uneven(out, rep, even.mesh, even.c, even.plan);
    CHECK(out.str().empty());
    CHECK(rep.strings.count("uneven") == 0);
    const Case odd(6, Uneven::chunk);  // 6 rows over Y=4: blocks of 2, 2, 2, 0
    print_uneven(out, rep, odd.mesh, odd.c, odd.plan);
    CHECK(out.str().find("  uneven blocks (--uneven chunk: blocks of ceil(d/n) rows") == 0);
    CHECK(out.str().find("A") != std::string::npos);
    CHECK(rep.strings.at("uneven") == "chunk");
  }

  TEST_CASE("report_plan: the plan's fields; with plan_only its collectives as planned, else none") {
    const Case k(8);
    Report run, plan_only;
    report_plan(run, k.mesh, k.c, k.plan, false);
    report_plan(plan_only, k.mesh, k.c, k.plan, true);
    CHECK(run.strings.at("einsum") == "ik,kj->ij");
    CHECK(run.strings.at("a_spec") == "Y,_");
    CHECK(run.numbers.at("plan_bytes_per_device") == double(k.plan.predicted_bytes_per_device()));
    CHECK_FALSE(run.plan_only);
    CHECK(run.planned.empty());
    CHECK(plan_only.plan_only);
    REQUIRE(plan_only.planned.size() == k.plan.collectives().size());
    REQUIRE_FALSE(plan_only.planned.empty());
    double bytes = 0;
    for (const auto& row : plan_only.planned) bytes += double(row.predicted_bytes_per_device);
    CHECK(bytes == double(k.plan.predicted_bytes_per_device()));
  }
}
