// harness/plan/keep_gathered.cpp: keep_gathered = true on the sequence-parallel layer
// (harness/cases/transformer_sequence_parallel.toml, t = 4 devices over Y): the backward pass no
// longer re-gathers a and f, the layer norms' outputs the forward gathered over s. Against the
// formula: each re-gather is an all_gather of a [b,s,m] activation, (t-1)/t * b*s*m*e bytes sent
// per device, and each kept copy is the whole [b,s,m], b*s*m*e bytes held (e = 4, float32).
// The kept plan still verifies on the sim mesh; the file refuses keep_gathered without backward.
#include <doctest/doctest.h>

#include <string>

#include "core/error.hpp"
#include "harness/check/case_file.hpp"
#include "harness/models/case_run.hpp"
#include "harness/plan/keep_gathered.hpp"
#include "tests/run_program.hpp"

using namespace shardlab;

TEST_SUITE("keep_gathered") {

TEST_CASE("keep_gathered on the sequence-parallel layer: saves 2 all_gathers, holds 2 [b,s,m] copies") {
  CaseFile c = read_case_file("harness/cases/transformer_sequence_parallel.toml");
  const Mesh mesh = Mesh::parse(c.mesh);
  const std::size_t b = 2, s = 8, m = 16, t = 4, e = 4;
  REQUIRE(c.program.sizes.at('b') == b);
  REQUIRE(c.program.sizes.at('s') == s);
  REQUIRE(c.program.sizes.at('m') == m);
  const ProgramPlan regather = plan_case(c, mesh);
  c.keep_gathered = true;
  const ProgramPlan keep = plan_case(c, mesh);
  const KeepTradeOff k = keep_trade_off(regather, keep);
  const std::size_t regathers = 2;  // a and f, each gathered once more for the weights' gradients
  CHECK(k.saved() == long(regathers * (t - 1) * b * s * m * e / t));  // 1536 B
  CHECK(k.held() == regathers * b * s * m * e);                         // 2048 B
  REQUIRE(k.copies.size() == regathers);
  CHECK(k.copies[0].tensor == "a");
  CHECK(k.copies[1].tensor == "f");
  CHECK(k.peak_keep > k.peak_regather);
  // The all_gathers left: the forward's 2 and the backward's mirrored 2 (dy, dr1), no re-gathers.
  std::size_t gathers = 0;
  for (const auto& line : keep.collective_lines()) gathers += line.rfind("all_gather a ", 0) == 0 || line.rfind("all_gather f ", 0) == 0;
  CHECK(gathers == 2);
  CHECK(copies_kept_for_backward(regather).empty());
  testing::run_program_checked(keep, DType::float32);
  const std::string text = keep_gathered_text(k, true);
  CHECK(text.find("keeping saves 1536 B sent per device") != std::string::npos);
  CHECK(text.find("costs 2048 B held per device") != std::string::npos);
}

TEST_CASE("keep_gathered without backward, or not a boolean: refused naming the line") {
  const std::string base = "name = \"t\"\nmesh = \"X=2\"\ndims = { a = 4 }\ninputs = { x = \"a\" }\n"
                           "ops = [ { out = \"y\", op = \"relu\", in = [\"x\"] } ]\noutputs = [\"y\"]\n";
  for (const std::string& bad : {std::string("keep_gathered = true\n"), std::string("keep_gathered = 1\n")}) {
    try {
      parse_case_file(base + bad, "t.toml");
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("t.toml:7: keep_gathered") != std::string::npos);
    }
  }
}

}  // TEST_SUITE
