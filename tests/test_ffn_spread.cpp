// harness/models/ffn_spread.cpp: the FFN's full check with bounds tightened by the spread of two
// other summation orders (ffn_spread.hpp).
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "core/tensor.hpp"
#include "harness/models/ffn.hpp"
#include "harness/models/ffn_spread.hpp"
#include "tests/run_binary.hpp"

using namespace shardlab;

namespace {
FfnInputsOf<float> random_inputs(std::size_t b, std::size_t s, std::size_t m, std::size_t h, std::uint64_t seed) {
  // Not on a grid: sums round, so the order of a sum matters.
  auto uniform = [&](Shape shape, std::uint64_t k) { return converted<float>(random_uniform(shape, seed + k, -1.0, 1.0)); };
  FfnInputsOf<float> in;
  in.x = uniform({b, s, m}, 1);
  in.w_in = uniform({m, h}, 2);
  in.w_out = uniform({h, m}, 3);
  in.r = uniform({b, s, m}, 4);
  return in;
}
}  // namespace

TEST_CASE("ffn_reference_in_blocks: another order moves a float32 layer, but not one whose sums are exact") {
  const auto in = random_inputs(2, 4, 64, 256, 7);
  const auto ref = ffn_reference(in, true);
  FfnGroups groups;
  groups.y = 4;
  const auto alt = ffn_reference_in_blocks(in, true, groups, true, 0);
  const double moved = xt::amax(xt::abs(converted<double>(alt.y) - converted<double>(ref.y)))();
  CHECK(moved > 0);                                         // the order really changed
  CHECK(moved < 1e-4 * xt::amax(xt::abs(converted<double>(ref.y)))());  // and only by rounding
  // Integers: every order gives the same sums (h and dg; gelu makes the rest non-integer).
  FfnInputsOf<double> ints;
  ints.x = random_integers({2, 4, 16}, 1, -3, 3);
  ints.w_in = random_integers({16, 32}, 2, -3, 3);
  ints.w_out = random_integers({32, 16}, 3, -3, 3);
  ints.r = random_integers({2, 4, 16}, 4, -3, 3);
  const auto exact = ffn_reference(ints, true), blocks = ffn_reference_in_blocks(ints, true, groups, false, 1);
  CHECK(xt::amax(xt::abs(exact.h - blocks.h))() == 0);
  CHECK(xt::amax(xt::abs(exact.dg - blocks.dg))() == 0);
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
