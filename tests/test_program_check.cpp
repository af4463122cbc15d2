// harness/check/program_check.cpp: the unsharded reference of a program and its tolerances.
// Chunked sums are the same sums in another order (exact where every order is exact); the
// checked reference's tolerances never exceed the worst-case bounds and reach the float32 floor
// on the Transformer layer, where the worst case was 1e3 x RMS; one element off by 1e-3 of the
// RMS fails, and the sharded runs of the layer pass in every element type over several seeds.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include <xtensor/xview.hpp>

#include "core/einsum.hpp"

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
  TEST_CASE("contraction_expected: exact integer sums get bound 0; float32 reals a bound at the floor that 4 partial sums meet and 1e-3 breaks") {
    const Einsum eq = Einsum::parse("ik,kj->ij");
    const Tensor ai = random_integers({8, 16}, 1, -4, 4), bi = random_integers({16, 8}, 2, -4, 4);
    const ExpectedTensor exact = contraction_expected(eq, ai, bi, DType::float32, 4);
    CHECK(xt::amax(exact.bound)() == 0);
    CHECK(exact.value == reference_einsum(eq, ai, bi));
    // bfloat16 holds integers up to 256: 16 terms of up to 16 reach it, so the bound is not 0.
    const Tensor a64 = random_integers({8, 64}, 1, -4, 4), b64 = random_integers({64, 8}, 2, -4, 4);
    CHECK(xt::amax(contraction_expected(eq, a64, b64, DType::bfloat16, 4).bound)() > 0);

    const Tensor a = rounded(random_uniform({16, 256}, 3, -1, 1), DType::float32);
    const Tensor b = rounded(random_uniform({256, 16}, 4, -1, 1), DType::float32);
    const ExpectedTensor e = contraction_expected(eq, a, b, DType::float32, 4);
    // As 4 devices sum: each a quarter of k in float32, the parts added from the last.
    const Tensor sharded = sum_rounded(4, true, DType::float32, [&](std::size_t q) {
      const std::size_t lo = 64 * q, hi = 64 * (q + 1);
      const Tensor aq = xt::view(a, xt::all(), xt::range(lo, hi)), bq = xt::view(b, xt::range(lo, hi), xt::all());
      return rounded(reference_einsum(eq, aq, bq), DType::float32);
    });
    CHECK(xt::amax(xt::abs(sharded - e.value))() > 0);  // another order: not the same bits
    const Verdict v = compare("C", sharded, e.value, e.bound);
    CAPTURE(v.line());
    CHECK(v.pass);
    CHECK(v.power <= power_floor(DType::float32));
    Tensor off = sharded;
    std::size_t big = 0;
    for (std::size_t i = 0; i < off.size(); ++i)
      if (std::fabs(off.data()[i]) > std::fabs(off.data()[big])) big = i;
    off.data()[big] *= 1 + 1e-3;
    CHECK_FALSE(compare("C", off, e.value, e.bound).pass);
  }
}
