// harness/plan/program_explain.cpp: --explain on programs. A gelu whose input is annotated X,_ and
// whose output is annotated whole on mesh X=4: x is all-gathered, 3/4 of its 8 x 8 float32 block
// rows, 192 B per device; laid out whole x would move nothing (0 B), laid out _,X it is gathered
// too (192 B). Each alternative's bytes also equal plan_tensor_program' with that spec (the program
// planned apart). The sequence-parallel layer's explanation names every moved tensor and fits 100
// columns; `shardlab run --plan-only --explain` prints it.
#include <doctest/doctest.h>

#include <string>

#include "core/text.hpp"
#include "harness/check/case_file.hpp"
#include "harness/models/case_run.hpp"
#include "harness/plan/program_explain.hpp"
#include "tests/run_binary.hpp"

using namespace shardlab;

TEST_SUITE("program_explain") {

TEST_CASE("--explain for a gather: why x lies X,_, and what _,_ and _,X would cost, by formula") {
  const CaseFile c = parse_case_file(R"(name = "t"
mesh = "X=4"
dims = { i = 8, j = 8 }
inputs = { x = "ij" }
shard = { x = "X,_", g = "_,_" }
ops = [ { out = "g", op = "gelu", in = ["x"] } ]
outputs = ["g"]
)", "t.toml");
  const ProgramPlan plan = plan_case(c, Mesh::parse("X=4"));
  const std::size_t gather = 3 * 8 * 8 * 4 / 4;  // (n-1)/n of the whole x, float32
  REQUIRE(plan.predicted_bytes_per_device() == gather);
  const auto alts = layout_alternatives(plan, "x");
  REQUIRE(alts.size() == 3);
  CHECK(alts[0].first.text() == "X,_");
  CHECK(alts[0].second == gather);
  CHECK(alts[1].first.text() == "_,_");
  CHECK(alts[1].second == 0);
  CHECK(alts[2].first.text() == "_,X");
  CHECK(alts[2].second == gather);
  for (const auto& [spec, bytes] : alts) {  // the same program planned apart with that spec
    Propagation p = plan.propagation;
    p.specs.at("x").spec = spec;
    CHECK(plan_tensor_program(plan.program, plan.mesh, p, DType::float32).predicted_bytes_per_device() == bytes);
  }
  const std::string text = program_explain_text(plan);
  CAPTURE(text);
  CHECK(text.find("x[ij] lies as X,_: annotated") != std::string::npos);
  CHECK(text.find("all_gather over X for op 1 (g = gelu, line 6): X,_ -> _,_, 192 B") != std::string::npos);
  CHECK(text.find("alternatives: X,_ 192 B (planned), _,_ 0 B, _,X 192 B") != std::string::npos);
}

TEST_CASE("--explain on the sequence-parallel layer: every moved tensor, within 100 columns") {
  const CaseFile c = read_case_file("harness/cases/transformer_sequence_parallel.toml");
  const ProgramPlan plan = plan_case(c, Mesh::parse(c.mesh));
  const std::string text = program_explain_text(plan);
  for (const auto* s : plan.collectives()) CHECK(text.find("\n  " + s->tensor + "[") != std::string::npos);
  for (const auto& line : split(text, '\n')) CHECK(line.size() <= 100);
  const auto r = testing::run_binary("shardlab run harness/cases/attention_fused_qkv.toml --plan-only --explain");
  CHECK(r.status == 0);
  CHECK(r.out.find("y[bsm] lies as _,_,_") != std::string::npos);
  CHECK(r.out.find("alternatives: _,_,_ 1536 B (planned)") != std::string::npos);
}

TEST_CASE("the plan table of a program with long tensor names stays one line a step, within 100 columns") {
  // attention_megatron.toml's backward names dp_minus_softmax_sum_p (22 letters): the table once
  // repeated each op's output in a column of its own and wrapped every sent/device onto a line.
  const CaseFile c = read_case_file("harness/cases/attention_megatron.toml");
  const ProgramPlan plan = plan_case(c, Mesh::parse(c.mesh));
  const std::string text = program_plan_text(plan);
  std::size_t rows = 0;
  for (const auto& line : split(text, '\n')) {
    CHECK(line.size() <= 100);
    if (line.find(" contract ") != std::string::npos) {
      ++rows;
      CHECK(line.back() == '0');  // the bytes end the step's own line
    }
  }
  CHECK(rows == 18);  // the 18 einsums of the forward and backward
  CHECK(text.find("dp_minus_softmax_sum_p") != std::string::npos);
}

}  // TEST_SUITE
