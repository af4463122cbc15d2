// core/subnormal.cpp and the flush of core/dtype.hpp: no subnormal reaches a contraction. The
// rounding rules by hand, flush-to-zero in every thread, the counter against planted subnormals,
// then every contraction of the FFN, attention, the transformer layer and the MoE, forward and
// backward, in float32 and bfloat16, counted: zero. Each model runs on inputs that would give
// subnormals without the flush (checked here apart, in float64), so the count can fail.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "collectives/runtime.hpp"
#include "core/einsum.hpp"
#include "core/gemm.hpp"
#include "core/subnormal.hpp"
#include "harness/check/case_file.hpp"
#include "harness/check/session.hpp"
#include "harness/models/case_run.hpp"
#include "harness/models/ffn.hpp"
#include "harness/models/moe.hpp"
#include "harness/models/transformer_layer.hpp"

using namespace shardlab;

namespace {

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// `text` with its first `from` replaced by `to` (the test's own edits of a shipped program).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

// Runs a case in element type t on sim with counting on; every check must pass.
SubnormalTally count_case(CaseFile c, DType t) {
  c.dtype = dtype_name(t);
  CommonOptions o;
  o.mesh = c.mesh;
  o.dtype = c.dtype;
  o.quiet = true;
  Session session("subnormal", o);
  start_counting_subnormals();
  const CaseRun r = run_case(session, c, plan_case(c, session.mesh()), false);
  const SubnormalTally tally = stop_counting_subnormals();
  for (const auto& v : r.checks) {
    CAPTURE(v.name);
    CAPTURE(v.line());
    CHECK(v.pass);
  }
  return tally;
}

// How many of gelu'(v) for v in `h` fall in float32's subnormal range unflushed: computed apart
// from core/gelu.cpp, in float64.
std::size_t unflushed_gelu_grad_subnormals(const Tensor& h) {
  std::size_t k = 0;
  for (double v : h) {
    const double g = 0.5 * std::erfc(-v / std::sqrt(2.0)) + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    const double a = std::fabs(g);
    k += a > std::ldexp(1.0, -150) && a < std::ldexp(1.0, -126);  // rounds to a nonzero subnormal
  }
  return k;
}

}  // namespace

TEST_CASE("rounding to a type: below the smallest normal a zero of the value's sign, else to nearest") {
  const double tiny = std::ldexp(1.0, -127), normal = std::ldexp(1.0, -126);
  CHECK(bits_of(element_cast<float>(tiny)) == 0u);
  CHECK(bits_of(element_cast<float>(-tiny)) == 0x80000000u);  // -0
  CHECK(element_cast<float>(normal) == FLT_MIN);
  CHECK(round_to(DType::float32, std::ldexp(3.0, -128)) == 0.0);  // 0.75 x 2^-126
  CHECK(round_to(DType::float32, std::ldexp(3.0, -127)) == std::ldexp(3.0, -127));
  CHECK(round_to(DType::bfloat16, tiny) == 0.0);
  CHECK(round_to(DType::bfloat16, normal) == normal);
  CHECK(round_to(DType::float64, std::ldexp(1.0, -1030)) == 0.0);
  CHECK(bfloat16(float_of(0x00400000u)).bits == 0x0000);  // 2^-127, a float32 subnormal
  CHECK(bfloat16(float_of(0x80000001u)).bits == 0x8000);
  CHECK(bfloat16(FLT_MIN).bits == 0x0080);
  CHECK(bfloat16_from_double(-tiny).bits == 0x8000);
  // A collective's sum of two normals that cancels below 2^-126: zero.
  const float a[2] = {1.5f * FLT_MIN, 1.0f}, b[2] = {-FLT_MIN, 2.0f};
  float out[2];
  add_elements(DType::float32, out, a, b, 2);
  CHECK(bits_of(out[0]) == 0u);
  CHECK(out[1] == 3.0f);
}

TEST_CASE("flush-to-zero and denormals-are-zero in this thread and in threads it starts") {
#if defined(__x86_64__)
  CHECK(subnormals_flushed_in_this_thread());
  bool in_thread = false;
  std::thread([&] { in_thread = subnormals_flushed_in_this_thread(); }).join();
  CHECK(in_thread);
  Runtime rt(Backend::sim);
  const RunResult r = rt.run(Mesh::parse("X=2"), [](Device&) {
    return Outputs{{"ftz", Tensor({subnormals_flushed_in_this_thread() ? 1.0 : 0.0})}};
  });
  for (const auto& out : r.outputs) CHECK(out.at("ftz")(0) == 1.0);
#endif
}

TEST_CASE("the counter finds planted subnormals, and a GEMM's subnormal result is flushed") {
  const float f[5] = {float_of(1u), 1.0f, 0.0f, float_of(0x807fffffu), -0.0f};
  CHECK(subnormals_in(f, 5) == 2);
  const double d[4] = {std::ldexp(1.0, -130), std::ldexp(1.0, -126), 0.0, std::ldexp(1.0, -1030)};
  CHECK(subnormals_in(d, 4, DType::float32) == 2);
  CHECK(subnormals_in(d, 4, DType::bfloat16) == 2);
  CHECK(subnormals_in(d, 4, DType::float64) == 1);
  // [1 x 2] x [2 x 1]: a planted subnormal operand is counted; 2^-70 x 2^-70 = 2^-140 is flushed.
  const float a[2] = {float_of(0x00000010u), std::ldexp(1.0f, -70)}, b[2] = {1.0f, std::ldexp(1.0f, -70)};
  float c = 1.0f;
  start_counting_subnormals();
  batched_gemm(1, 1, 1, 2, a, false, b, false, &c);
  const SubnormalTally t = stop_counting_subnormals();
  CHECK(t.contractions == 1);
  CHECK(t.elements == 4);
  CHECK(t.subnormal == 1);
  CHECK(bits_of(c) == 0u);
  batched_gemm(1, 1, 1, 2, a, false, b, false, &c);  // not counting: the tally stays
  CHECK(stop_counting_subnormals().subnormal == 1);
}

TEST_CASE("FFN forward and backward, pairwise on Y=2: no subnormal operand in float32 or bfloat16") {
  // h = x W_in has std sqrt(M / 16) = 8 (ffn.hpp's inputs): gelu'(h) is subnormal near h = -13.5.
  FfnConfig c;
  c.strategy = "pairwise";
  c.backward = true;
  c.finite_differences = false;
  c.dims = parse_ffn_dims("B=2,S=4,M=1024,H=256");
  const FfnInputs in = ffn_inputs(c.dims, c.seed);
  const Tensor h = contract(Einsum::parse("bsm,mh->bsh"), in.x, in.w_in);
  const std::size_t would = unflushed_gelu_grad_subnormals(h);
  MESSAGE("gelu'(h) unflushed: " << would << " subnormal of " << h.size());
  CHECK(would >= 10);
  for (DType t : {DType::float32, DType::bfloat16}) {
    CAPTURE(dtype_name(t));
    c.dtype = t;
    Runtime rt(Backend::sim, false, t);
    start_counting_subnormals();
    const FfnResult r = run_ffn(rt, Mesh::parse("Y=2"), c);
    const SubnormalTally tally = stop_counting_subnormals();
    MESSAGE(dtype_name(t) << " FFN: " << tally.contractions << " contractions, " << tally.elements
                          << " operand elements, " << tally.subnormal << " subnormal");
    // Every value check within its bound (in bfloat16, without a replay, the run is WEAK as a whole).
    for (const auto& v : r.checks) {
      CAPTURE(v.line());
      CHECK(v.pass);
    }
    CHECK(tally.contractions >= 12);  // 6 sharded on each of 2 devices, and the reference's
    CHECK(tally.subnormal == 0);
  }
}

TEST_CASE("attention and the transformer layer, forward and backward: no subnormal operand") {
  // Scores scaled by 64 instead of 0.5: softmax's exp(s - max) lands below 2^-126 for many entries.
  std::ifstream file("harness/cases/attention_megatron.toml");
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const CaseFile att = parse_case_file(replaced(text, "value = 0.5", "value = 64"), "attention.toml");
  // The layer: the same scores, and the FFN's input scaled by 32 so that h reaches below -13.
  std::string layer = replaced(transformer_layer_text(), "value = 0.5", "value = 64");
  layer = replaced(layer, R"(in = ["f", "W_in"])", R"(in = ["fs", "W_in"])");
  layer = replaced(layer, R"(  { out = "h", op)",
                   "  { out = \"fs\", op = \"scale\", in = [\"f\"], value = 32, part = \"ffn\" },\n  { out = \"h\", op");
  const CaseFile tl = parse_case_file("name = \"layer\"\nmesh = \"Y=4\"\n" + layer, "layer.toml");
  for (DType t : {DType::float32, DType::bfloat16}) {
    CAPTURE(dtype_name(t));
    const SubnormalTally a = count_case(att, t), l = count_case(tl, t);
    MESSAGE(dtype_name(t) << " attention: " << a.contractions << " contractions, " << a.subnormal
                          << " subnormal; layer: " << l.contractions << ", " << l.subnormal);
    CHECK(a.contractions > 0);
    CHECK(l.contractions > 0);
    CHECK(a.subnormal == 0);
    CHECK(l.subnormal == 0);
  }
}

TEST_CASE("MoE forward and backward, sharded and reference: no subnormal operand") {
  // x scaled by 2^-120 and W_in by 2^-8: h = x W_in is a few times 2^-128, below 2^-126 unflushed.
  MoeShape s;
  MoeInputs in = moe_inputs(s, 3);
  in.x = in.x * std::ldexp(1.0, -120);
  in.w_in = in.w_in * std::ldexp(1.0, -8);
  const Tensor h = contract(Einsum::parse("tm,emh->teh"), in.x, in.w_in);
  std::size_t would = 0;
  for (double v : h) would += v != 0 && std::fabs(v) < std::ldexp(1.0, -126);
  CHECK(would > 0);
  for (DType t : {DType::float32, DType::bfloat16}) {
    CAPTURE(dtype_name(t));
    Runtime rt(Backend::sim, false, t);
    start_counting_subnormals();
    rt.run(Mesh::parse("X=2,Y=4"), [&](Device& dev) { return moe_device(dev, in, s); });
    moe_reference(in, s, 8, 2, t);
    const SubnormalTally tally = stop_counting_subnormals();
    MESSAGE(dtype_name(t) << " MoE: " << tally.contractions << " contractions, " << tally.subnormal << " subnormal");
    CHECK(tally.contractions > 0);
    CHECK(tally.subnormal == 0);
  }
}
