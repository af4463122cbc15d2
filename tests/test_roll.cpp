// core/roll.cpp and the program op roll (harness/plan/program.cpp, program_plan.cpp, gradient.cpp):
// roll against a brute force written here; a program that rolls a tensor split over X by whole
// blocks runs as a collective_permute of the blocks, its outputs equal to the unsharded program's
// (harness/check/program_check.hpp) in 3 dtypes, the ledger's bytes the plan's; its gradient is the
// opposite roll (central differences agree); a roll by part of a block is refused naming the op.
#include <doctest/doctest.h>

#include <string>

#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/roll.hpp"
#include "harness/check/case_file.hpp"
#include "harness/check/gradient_check.hpp"
#include "harness/check/program_check.hpp"
#include "harness/check/report.hpp"
#include "harness/check/verify.hpp"
#include "harness/plan/gradient.hpp"
#include "harness/plan/program_plan.hpp"
#include "tests/run_program.hpp"

using namespace shardlab;

namespace {

const char* kBody = R"(dims = { s = 16, d = 4, e = 4 }
inputs = { x = "sd", W = "de" }
ops = [
  { out = "y", op = "roll", in = ["x"], over = "s", value = 4 },
  { out = "z", op = "einsum", eq = "sd,de->se", in = ["y", "W"] },
]
outputs = ["z"]
)";

}  // namespace

TEST_SUITE("roll") {

TEST_CASE("roll: out[i] = x[i - by mod n] along the dim, by brute force") {
  Tensor x = xt::empty<double>(Shape{3, 5, 2});
  for (std::size_t k = 0; k < x.size(); ++k) x.data()[k] = double(k);
  for (long by : {0L, 1L, 2L, -1L, 7L}) {
    const Tensor y = roll_op(x, 1, by);
    for (std::size_t a = 0; a < 3; ++a)
      for (std::size_t i = 0; i < 5; ++i)
        for (std::size_t c = 0; c < 2; ++c) CHECK(y(a, i, c) == x(a, std::size_t(((long(i) - by) % 5 + 5) % 5), c));
  }
  CHECK_THROWS_AS(roll_op(x, 3, 1), Error);
}

TEST_CASE("roll in a program: whole blocks of a split dim move by collective_permute, in 3 dtypes") {
  const CaseFile c = parse_case_file(std::string("name = \"t\"\nmesh = \"X=4\"\n") + kBody, "t.toml");
  const Mesh mesh = Mesh::parse("X=4");
  for (DType t : {DType::float32, DType::float64, DType::bfloat16}) {
    CAPTURE(dtype_name(t));
    const ProgramPlan plan = plan_tensor_program(c.program, mesh, propagate(c.program, mesh, {{"x", "X,_"}}), t);
    const auto ran = testing::run_program_checked(plan, t);
    REQUIRE(ran.size() == 1);
    CHECK(ran[0].op == "collective_permute");
    CHECK(ran[0].tensor == "y");
    CHECK(ran[0].bytes_per_device == 4 * 4 * element_bytes(t));  // x's block [4, 4]
  }
  // x whole on every device: the roll is local and nothing moves.
  const ProgramPlan local =
      plan_tensor_program(c.program, mesh, propagate(c.program, mesh, {{"x", "_,_"}}), DType::float32);
  CHECK(testing::run_program_checked(local, DType::float32).empty());
}

TEST_CASE("roll's gradient is the opposite roll: dx = roll(dy, -4), the block moved back by permute") {
  const CaseFile c = parse_case_file(std::string("name = \"t\"\nmesh = \"X=4\"\n") + kBody, "t.toml");
  const Mesh mesh = Mesh::parse("X=4");
  const GradientProgram g = gradient_program(c.program);
  bool found = false;
  for (std::size_t i = g.forward_ops; i < g.program.ops.size(); ++i)
    if (g.program.ops[i].name == "roll") {
      found = true;
      CHECK(g.program.ops[i].value == -4);
      CHECK(g.program.ops[i].over == "s");
    }
  CHECK(found);
  // The rule against central differences of the unsharded program (an independent check of -4).
  for (const Verdict& v : central_difference_checks(c.program, g, 5)) {
    CAPTURE(v.line());
    CHECK(v.pass);
  }
  const Propagation fwd = propagate(c.program, mesh, {{"x", "X,_"}});
  const ProgramPlan plan = plan_tensor_program(g.program, mesh, gradient_propagation(g, mesh, fwd), DType::float32);
  int permutes = 0;
  for (const PlanStep* s : plan.collectives())
    if (s->kind == StepKind::collective_permute) {
      ++permutes;
      CHECK((s->shift == 1 || s->shift == 3));  // +1 forward, -1 = 3 mod 4 backward
    }
  CHECK(permutes == 2);
  testing::run_program_checked(plan, DType::float32);
}

TEST_CASE("roll: part of a block, a dim it lacks, no value: one sentence naming the op") {
  const Mesh mesh = Mesh::parse("X=4");
  std::string body = kBody;
  body.replace(body.find("value = 4"), 9, "value = 2");
  const CaseFile c = parse_case_file("name = \"t\"\nmesh = \"X=4\"\n" + body, "t.toml");
  try {
    plan_tensor_program(c.program, mesh, propagate(c.program, mesh, {{"x", "X,_"}}), DType::float32);
    FAIL("a roll by half a block was planned");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::unsupported);
    CHECK(std::string(e.what()).find("only whole blocks move") != std::string::npos);
    CHECK(std::string(e.what()).find("op 1 (y = roll") != std::string::npos);
  }
  for (const char* bad : {"over = \"e\", value = 4", "over = \"s\"", "over = \"s\", value = 1.5"}) {
    std::string b = kBody;
    b.replace(b.find("over = \"s\", value = 4"), 22, bad);
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_case_file("name = \"t\"\nmesh = \"X=4\"\n" + b, "t.toml"), Error);
  }
}

}  // TEST_SUITE
