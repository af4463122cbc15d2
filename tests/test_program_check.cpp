// harness/check/program_check.cpp: the unsharded reference of a program and its tolerances.
// Chunked sums are the same sums in another order (exact where every order is exact); the
// checked reference's tolerances never exceed the worst-case bounds and reach the float32 floor
// on the Transformer layer, where the worst case was 1e3 x RMS; one element off by 1e-3 of the
// RMS fails, and the sharded runs of the layer pass in every element type over several seeds.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "harness/check/case_file.hpp"
#include "harness/check/program_check.hpp"
#include "harness/check/verify.hpp"
#include "harness/check/session.hpp"
#include "harness/models/case_run.hpp"
#include "harness/plan/gradient.hpp"

using namespace shardlab;

namespace {

double rms(const Tensor& t) {
  double s = 0;
  for (std::size_t i = 0; i < t.size(); ++i) s += t.data()[i] * t.data()[i];
  return std::sqrt(s / double(t.size()));
}

}  // namespace

TEST_SUITE("program check") {
  TEST_CASE("a chunked contraction or sum is the same sum: exact inputs give the same values in any order") {
    const CaseFile c = parse_case_file(R"(name = "t"
mesh = "X=2"
dims = { i = 4, k = 12, j = 3 }
inputs = { a = "ik", b = "kj" }
ops = [ { out = "c", op = "einsum", eq = "ik,kj->ij", in = ["a", "b"] },
        { out = "s", op = "sum", in = ["c"], over = "j" } ]
outputs = ["s"]
)", "t.toml");
    const auto inputs = program_inputs(c.program, 3);  // multiples of 1/64: every sum here is exact
    for (DType t : {DType::float64, DType::float32}) {
      const ProgramReference one = run_reference(c.program, inputs, t, 2);
      for (int chunks : {2, 3, 5}) {
        std::map<std::string, Tensor> values = inputs;
        for (const auto& op : c.program.ops) values[op.out] = op_value(c.program, op, values, t, {chunks, chunks == 3});
        CHECK(values.at("c") == one.values.at("c"));
        CHECK(values.at("s") == one.values.at("s"));
      }
    }
  }

  TEST_CASE("the Transformer layer: tolerances within the worst case, power within the float32 floor, 1e-3 caught") {
    const CaseFile c = read_case_file("harness/cases/transformer_megatron.toml");
    const GradientProgram g = gradient_program(c.program);
    const auto inputs = program_inputs(g.program, 0);
    const ProgramReference worst = run_reference(g.program, inputs, DType::float32, 4);
    const ProgramReference checked = checked_reference(g.program, inputs, DType::float32, 4);
    double worst_power = 0, checked_power = 0;
    for (const auto& name : g.program.outputs) {
      CAPTURE(name);
      const Tensor& want = checked.values.at(name);
      CHECK(want == worst.values.at(name));
      CHECK(xt::all(checked.bounds.at(name) <= worst.bounds.at(name)));
      worst_power = std::max(worst_power, compare(name, want, want, worst.bounds.at(name)).power);
      const Verdict v = compare(name, want, want, checked.bounds.at(name));
      checked_power = std::max(checked_power, v.power);
      // One element, the one nearest the RMS, off by 1e-3 of the RMS: fails.
      Tensor got = want;
      std::size_t at = 0;
      const double r = rms(want);
      for (std::size_t i = 1; i < got.size(); ++i)
        if (std::fabs(std::fabs(got.data()[i]) - r) < std::fabs(std::fabs(got.data()[at]) - r)) at = i;
      got.data()[at] += 1e-3 * r;
      CHECK_FALSE(compare(name, got, want, checked.bounds.at(name)).pass);
    }
    MESSAGE("Transformer layer, float32: worst-case power " << worst_power << ", checked " << checked_power);
    CHECK(worst_power > 1.0);  // the worst case could not catch a wrong answer as large as the values
    CHECK(checked_power <= power_floor(DType::float32));
  }

  TEST_CASE("the Transformer layer's sharded runs pass the checked tolerances: 3 element types x 4 seeds") {
    for (DType t : {DType::float64, DType::float32, DType::bfloat16})
      for (std::uint64_t seed : {1, 2, 3, 4}) {
        CaseFile c = read_case_file("harness/cases/transformer_megatron.toml");
        c.dtype = dtype_name(t);
        c.seed = seed;
        CAPTURE(c.dtype);
        CAPTURE(seed);
        CommonOptions o;
        o.mesh = c.mesh;
        o.dtype = c.dtype;
        o.quiet = true;
        Session session("t", o);
        const CaseRun r = run_case(session, c, plan_case(c, session.mesh()), false);
        for (const auto& v : r.checks) {
          CAPTURE(v.name);
          CAPTURE(v.line());
          if (v.name.find("against the unsharded program") != std::string::npos) CHECK(v.pass);
        }
      }
  }
}
