// harness/models/ffn_check.cpp: the FFN's full verification through the program checker. Expected
// values from independent sources: the shipped case file's program (harness/cases/gspmd_ffn.toml),
// the group sizes written out from article 001's and article 003's layouts, and the layer in
// float64 from reference_einsum (no BLAS, not the checker).
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>
#include <xtensor/xmath.hpp>

#include "core/einsum.hpp"
#include "core/gelu.hpp"
#include "core/tensor.hpp"
#include "harness/check/verify.hpp"
#include "harness/check/case_file.hpp"
#include "harness/models/ffn.hpp"
#include "harness/models/ffn_check.hpp"
#include "tests/run_binary.hpp"

using namespace shardlab;

namespace {

FfnConfig backward_config(const std::string& strategy, DType t) {
  FfnConfig c;
  c.strategy = strategy;
  c.backward = true;
  c.dtype = t;
  return c;
}

// The layer and its gradients by name, as a run in t holds them: each step in float64
// (reference_einsum multiplies by name and sums), rounded to t.
std::map<std::string, Tensor> by_hand(const FfnInputs& in, DType t) {
  auto e = [t](const char* eq, const Tensor& a, const Tensor& b) {
    return rounded(reference_einsum(Einsum::parse(eq), a, b), t);
  };
  const Tensor h = e("bsm,mh->bsh", in.x, in.w_in), g = rounded(gelu(h), t);
  const Tensor dh = rounded(e("bsm,hm->bsh", in.r, in.w_out) * rounded(gelu_grad(h), t), t);
  return {{"y", e("bsh,hm->bsm", g, in.w_out)},
          {"dx", e("bsh,mh->bsm", dh, in.w_in)},
          {"dW_in", e("bsm,bsh->mh", in.x, dh)},
          {"dW_out", e("bsh,bsm->hm", g, in.r)}};
}

double largest(const Tensor& t) { return xt::amax(xt::abs(t))(); }

}  // namespace

TEST_CASE("ffn_reduction_groups: the devices each contraction's partial sums are added over") {
  const FfnGroups g = ffn_reduction_groups(plan_ffn(Mesh::parse("X=2,Y=4"), backward_config("gspmd", DType::float64)));
  CHECK(g.h == 1);  // both operands gathered, H stays split: no reduction
  CHECK(g.y == 4);  // reduce_scatter y over Y
  const Mesh line = Mesh::parse("Y=4");
  const FfnGroups p = ffn_reduction_groups(plan_ffn(line, backward_config("pairwise", DType::float64)));
  CHECK(p.h == 1);
  CHECK(p.y == 4);   // all_reduce y over Y
  CHECK(p.dx == 4);  // all_reduce dx over Y
  const FfnGroups r = ffn_reduction_groups(plan_ffn(line, backward_config("row", DType::float64)));
  CHECK(r.h == 4);  // all_reduce h over Y
}

TEST_CASE("ffn_tensor_program is the program the shipped case file writes, and its gradient the FFN's backward") {
  const CaseFile c = read_case_file("harness/cases/gspmd_ffn.toml");
  const TensorProgram p = ffn_tensor_program(FfnDims{});
  CHECK(program_text(p) == program_text(c.program));
  CHECK(p.sizes == c.program.sizes);
}

TEST_CASE("ffn_full_checks: an exact copy of the layer passes with every tolerance far below the values, in each type") {
  // Per type: the margin each tolerance keeps below its tensor's largest value, the power the
  // rounding bound alone reaches (float32 and float64 their floors; bfloat16 about 0.1 x RMS, its 3e-2
  // floor met by the replay, docs/verification.md), and a relative change of the largest
  // element of dW_out that must fail.
  struct Type {
    DType t;
    double margin, power, nudge;
  };
  const Type types[] = {{DType::bfloat16, 8, 0.15, 0.25}, {DType::float32, 4096, 1e-3, 1e-3},
                        {DType::float64, 1e12, 1e-9, 1e-9}};
  for (const Type& type : types) {
    const DType t = type.t;
    CAPTURE(dtype_name(t));
    const FfnPlan plan = plan_ffn(Mesh::parse("X=2,Y=4"), backward_config("gspmd", t));
    const FfnInputs in = ffn_inputs(FfnDims{}, 0);  // on the 1/8 grid: exact in every type
    std::map<std::string, Tensor> want = by_hand(in, t);
    const std::map<std::string, Tensor> inputs = {{"x", in.x}, {"W_in", in.w_in}, {"W_out", in.w_out}, {"dy", in.r}};
    const std::vector<Verdict> checks = ffn_full_checks(plan, inputs, want);
    REQUIRE(checks.size() == 4);
    for (const Verdict& v : checks) {
      CAPTURE(v.line());
      CHECK(v.pass);
      CHECK(v.power <= type.power);
      const std::string name = v.name.substr(0, v.name.find(' '));
      CHECK(v.tolerance * type.margin <= largest(want.at(name)));
    }
    Tensor& w = want.at("dW_out");
    std::size_t big = 0;
    for (std::size_t i = 0; i < w.size(); ++i)
      if (std::fabs(w.data()[i]) > std::fabs(w.data()[big])) big = i;
    w.data()[big] *= 1 + type.nudge;
    const std::vector<Verdict> bad = ffn_full_checks(plan, inputs, want);
    CHECK(bad[0].pass);
    CHECK_FALSE(bad[3].pass);
  }
}

TEST_CASE("ffn_rule_checks: central differences pass the FFN's gradient rules, one check per input") {
  const std::vector<Verdict> rules = ffn_rule_checks(FfnDims{2, 2, 8, 32}, 3);
  REQUIRE(rules.size() == 3);  // x, W_in, W_out
  for (const Verdict& v : rules) {
    CAPTURE(v.line());
    CHECK(v.pass);
    CHECK(v.name.find("central differences") != std::string::npos);
  }
}

TEST_CASE("shardlab ffn, float32, B=2,S=32,M=128,H=512: every check at a tenth of the floor, and one element off by 1e-4 fails y") {
  const std::string run = "shardlab ffn --backward --dims B=2,S=32,M=128,H=512 --json";
  const auto clean = testing::run_binary(run);
  REQUIRE(clean.status == 0);
  int compared = 0;
  const auto report = nlohmann::json::parse(clean.out);
  for (const auto& c : report["checks"]) {
    if (!c.contains("power") || c["name"].get<std::string>().find("central") != std::string::npos) continue;
    ++compared;
    CAPTURE(c["name"]);
    REQUIRE(c["power"].is_number());
    CHECK(c["power"].get<double>() <= 1e-4);  // ~1e-5; worst-case bounds alone: 7e-4 to 1e-3 here
  }
  CHECK(compared >= 4);
  // With the worst-case bounds alone, y and dx pass this (dW_in and dW_out catch it).
  const auto planted = testing::run_binary(run + " --inject perturb:1e-4");
  CHECK(planted.status == 1);
  const auto j = nlohmann::json::parse(planted.out);
  CHECK(j["checks"][0]["name"] == "y vs unsharded");
  CHECK(j["checks"][0]["pass"] == false);
}
