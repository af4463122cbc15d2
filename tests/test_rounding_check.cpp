// harness/check/rounding_check.cpp: the bfloat16 reference against float64. Rounded to nearest it
// passes; the same values truncated toward zero (written here apart from core/dtype.cpp, by
// clearing a float's low 16 bits) fail it in a large share of the elements.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>

#include "harness/check/case_file.hpp"
#include "harness/check/program_check.hpp"
#include "harness/check/rounding_check.hpp"

using namespace shardlab;

namespace {

const char* kCase = R"(name = "t"
mesh = "X=2"
dims = { i = 8, k = 32, j = 8 }
inputs = { a = "ik", b = "kj", d = "ij" }
ops = [ { out = "c", op = "einsum", eq = "ik,kj->ij", in = ["a", "b"] },
        { out = "e", op = "add", in = ["c", "d"] } ]
outputs = ["e"]
)";

// v to bfloat16 by truncation toward zero (through float, which holds v's first 24 bits).
double truncated(double v) {
  float f = static_cast<float>(v);
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits &= 0xFFFF0000u;
  std::memcpy(&f, &bits, sizeof bits);
  return f;
}

}  // namespace

TEST_SUITE("rounding check") {
  TEST_CASE("the bfloat16 reference passes; truncated values fail, naming the op") {
    const CaseFile c = parse_case_file(kCase, "t.toml");
    const auto inputs = program_inputs(c.program, 5);
    ProgramReference ref = run_reference(c.program, inputs, DType::bfloat16, 2);
    const Verdict clean = rounding_check(c.program, ref, DType::bfloat16);
    CHECK(clean.name == kRoundingCheck);
    CHECK(clean.pass);
    CHECK(clean.power < 0);  // a yes/no check of the rounding mode
    CHECK(clean.detail.find("128 elements within one rounding to nearest") == 0);

    // The product truncated instead of rounded: exact in float64, then cut to bfloat16.
    const ProgramOp& einsum = c.program.ops[0];
    const Tensor exact = op_value(c.program, einsum, ref.values, DType::float64);
    for (std::size_t i = 0; i < exact.size(); ++i) ref.values["c"].data()[i] = truncated(exact.data()[i]);
    const Verdict cut = rounding_check(c.program, ref, DType::bfloat16);
    CHECK_FALSE(cut.pass);
    CHECK(cut.detail.find("first in c (einsum)") != std::string::npos);
    const std::size_t outside = std::stoul(cut.detail);
    CHECK(outside >= 12);  // 18 of the 64 products with this seed: those cut by more than the bound's slack
  }
  TEST_CASE("an add truncated fails too; other element types get no check") {
    const CaseFile c = parse_case_file(kCase, "t.toml");
    const auto inputs = program_inputs(c.program, 6);
    ProgramReference ref = run_reference(c.program, inputs, DType::bfloat16, 2);
    const Tensor sum = op_value(c.program, c.program.ops[1], ref.values, DType::float64);
    for (std::size_t i = 0; i < sum.size(); ++i) ref.values["e"].data()[i] = truncated(sum.data()[i]);
    const Verdict cut = rounding_check(c.program, ref, DType::bfloat16);
    CHECK_FALSE(cut.pass);
    CHECK(cut.detail.find("first in e (add)") != std::string::npos);
    for (DType t : {DType::float32, DType::float64})
      CHECK(rounding_check(c.program, run_reference(c.program, inputs, t, 2), t).name.empty());
  }
}
