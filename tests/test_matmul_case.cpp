// harness/models/matmul_case.cpp: specs renamed to the mesh's axes, case setup and its errors, the
// devices that repeat one another's multiply, and the work summary read from device outputs.
#include <doctest/doctest.h>

#include <string>

#include "core/error.hpp"
#include "harness/models/matmul_case.hpp"
#include "harness/check/report.hpp"

using namespace shardlab;

namespace {
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

TEST_SUITE("matmul_case") {
  TEST_CASE("article_form writes a spec as article 001 does, and the device it follows is (0, 1)") {
    CHECK(article_form(Spec::parse("_,Y")) == "(full, sharded_Y)");
    CHECK(article_form(Spec::parse("X,Y")) == "(sharded_X, sharded_Y)");
    CHECK(article_form(Spec::parse("(X,Y),_")) == "(sharded_XY, full)");
    CHECK(article_device(Mesh::parse("X=2,Y=4")) == 1);
    CHECK(article_device(Mesh::parse("X=4,Y=2")) == 1);
    CHECK(article_device(Mesh::parse("X=2,Y=1")) == -1);
    CHECK(article_device(Mesh::parse("Y=4")) == -1);
  }

  TEST_CASE("case_spec renames X and Y to the mesh's own axes") {
    const Mesh m = Mesh::parse("rows=2,cols=4");
    CHECK(case_spec(m, "_,Y").text() == "_,cols");
    CHECK(case_spec(m, "(X,Y),_").text() == "(rows,cols),_");
    CHECK(case_spec(Mesh::parse("X=2,Y=4"), "X,Y").text() == "X,Y");
    try {
      case_spec(Mesh::parse("X=8"), "_,Y");
      FAIL("expected an error");
    } catch (const Error& e) {
      CHECK(has(e.what(), "needs a mesh with two axes"));
      CHECK(has(e.what(), "has 1 axis"));
    }
  }

  TEST_CASE("matmul_case: integer inputs, the reference product and the planner's plan") {
    const Mesh m = Mesh::parse("X=2,Y=4");
    MatmulCase c = matmul_case(m, "4,16,4", "_,Y", "Y,_", 0, 8);
    CHECK(c.m == 4);
    CHECK(c.k == 16);
    CHECK(c.n == 4);
    CHECK(shape_of(c.a) == Shape{4, 16});
    // C[0,0] summed by hand.
    double c00 = 0;
    for (std::size_t p = 0; p < 16; ++p) c00 += c.a(0, p) * c.b(p, 0);
    CHECK(c.want(0, 0) == c00);
    CHECK(c.plan.collectives().size() == 1);
    CHECK_THROWS_AS(matmul_case(m, "4,16", "_,Y", "Y,_", 0, 8), Error);
    CHECK_THROWS_AS(matmul_case(m, "4,6,4", "_,Y", "Y,_", 0, 8), Error);  // 6 over Y=4
  }

  TEST_CASE("same_work_groups: devices that multiply the very same blocks") {
    const Mesh m = Mesh::parse("X=2,Y=4");
    CHECK(same_work_groups(m, matmul_case(m, "4,16,4", "_,Y", "Y,_", 0, 8).plan) == "{0,4} {1,5} {2,6} {3,7}");
    CHECK(same_work_groups(m, matmul_case(m, "4,16,4", "_,Y", "X,_", 0, 8).plan) == "{0,1,2,3,4,5,6,7}");
    CHECK(same_work_groups(m, matmul_case(m, "4,16,4", "X,Y", "X,_", 0, 8).plan) == "{0,1,2,3} {4,5,6,7}");
    CHECK(same_work_groups(m, matmul_case(m, "4,16,4", "X,Y", "X,Y", 0, 8).plan) == "{0} {1} {2} {3} {4} {5} {6} {7}");
  }

  TEST_CASE("work_text reads each device's flops and bytes; the duplication factor uses the busiest") {
    const Mesh m = Mesh::parse("X=2");
    RunResult run;
    run.outputs.push_back(with_work({}, 256, 100));
    run.outputs.push_back(with_work({}, 512, 200));
    const std::string t = work_text(m, run, 512, 1000);
    CHECK(has(t, "256 to 512 by device; unsharded 512 / 2 devices = 256: 2x"));
    CHECK(has(t, "100 to 200 bytes by device"));
    run.outputs[1].erase("flops");
    CHECK_THROWS_AS(work_text(m, run, 512, 1000), Error);
  }

  TEST_CASE("cost_text and planner_agrees") {
    const Mesh m = Mesh::parse("X=2,Y=4");
    const MatmulCase c = matmul_case(m, "4,16,4", "X,Y", "X,Y", 0, 8);
    CHECK(cost_text(c.plan) == "256 bytes sent and 64 FLOPs per device");
    std::vector<CollectiveSummary> run(2);
    run[0].op = "all_gather", run[0].axes = "Y", run[0].tensor = "A", run[0].bytes_per_device = 192;
    run[1].op = "all_gather", run[1].axes = "X", run[1].tensor = "B", run[1].bytes_per_device = 64;
    CHECK(planner_agrees(c.plan, run).pass);
    run[1].axes = "Y";
    const Verdict v = planner_agrees(c.plan, run);
    CHECK_FALSE(v.pass);
    CHECK(has(v.detail, "the run did all_gather of B over Y"));
  }
}
