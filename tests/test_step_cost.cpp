// The modeled FFN step against alpha-beta-gamma worked out by hand from the plan's collectives.
#include <doctest/doctest.h>

#include "core/error.hpp"
#include "harness/cost/cost.hpp"
#include "harness/models/step_cost.hpp"
#include "tests/toy_hardware.hpp"

using namespace shardlab;

namespace {
Hardware toy() { return shardlab::testing::toy_hardware(4); }
}  // namespace

TEST_CASE("share: pairwise on D=2 by hand (one AllReduce forward, one backward)") {
  const Hardware h = toy();
  // B=2,S=4,M=8,H=32. Forward: x W_in on half of W_in's columns (2*8*8*16 = 2048 FLOPs), g W_out
  // on half of its rows (2048), then AllReduce y: n = 2*4*8 elements * 4 B = 256 B, p = 2:
  //   2(p-1) a + 2n(p-1)/p b + n(p-1)/p g = 2 us + 256 ns + 64 ns
  const StepCost f = ffn_step_cost("pairwise", "D=2", "B=2,S=4,M=8,H=32", false, h);
  CHECK(f.comm_seconds == doctest::Approx(2e-6 + 256e-9 + 64e-9));
  CHECK(f.compute_seconds == doctest::Approx(4096 / 1e12));
  CHECK(f.share() == doctest::Approx(2.32e-6 / (2.32e-6 + 4.096e-9)));
  // Training adds the AllReduce of dx (same size) and four contractions of 2048 FLOPs each.
  const StepCost t = ffn_step_cost("pairwise", "D=2", "B=2,S=4,M=8,H=32", true, h);
  CHECK(t.comm_seconds == doctest::Approx(2 * 2.32e-6));
  CHECK(t.compute_seconds == doctest::Approx(12288 / 1e12));
}

TEST_CASE("share: the article's forward step on a 2x4 mesh by hand (plan only, nothing allocated)") {
  const Hardware h = toy();
  // Seed 001: x[8,512,5120] X,_,Y; W_in[5120,20480] X,Y; W_out[20480,5120] Y,X. Forward:
  //   all_gather x over Y (p=4): gathered [4,512,5120]     n = 10485760 el
  //   all_gather W_in over X (p=2): gathered [5120,5120]   n = 26214400 el
  //   all_gather W_out over X (p=2): gathered [5120,5120]  n = 26214400 el
  //   reduce_scatter y over Y (p=4): input [4,512,5120]    n = 10485760 el
  // at 4 B per element; ring: (p-1) a + n (p-1)/p b (+ n (p-1)/p g for the reduction).
  const double nx = 10485760.0 * 4, nw = 26214400.0 * 4, a = 1e-6, b = 1e-9, g = 0.5e-9;
  const double comm = (3 * a + nx * 0.75 * b) + 2 * (a + nw * 0.5 * b) + (3 * a + nx * 0.75 * (b + g));
  // Two local products of 2 * 4*512 * 5120 * 5120 FLOPs.
  const double flops = 2 * (2.0 * 4 * 512 * 5120 * 5120);
  const StepCost c = ffn_step_cost("gspmd", "X=2,Y=4", "article", false, h);
  CHECK(c.comm_seconds == doctest::Approx(comm));
  CHECK(c.compute_seconds == doctest::Approx(flops / 1e12));
}

TEST_CASE("step cost: one row per collective of the plan, in order, with its group and size") {
  const Hardware h = toy();
  const StepCost c = ffn_step_cost("gspmd", "X=2,Y=4", "article", false, h);
  REQUIRE(c.collectives.size() == 4);
  // Seed 001's forward: gather x over Y, W_in and W_out over X, reduce-scatter y over Y.
  CHECK(c.collectives[0].op == "all_gather");
  CHECK(c.collectives[0].tensor == "x");
  CHECK(c.collectives[0].axes == "Y");
  CHECK(c.collectives[0].group == 4);
  CHECK(c.collectives[0].n_bytes == 10485760.0 * 4);
  CHECK(c.collectives[0].sent_bytes == 10485760.0 * 4 * 3 / 4);  // a ring of 4 sends 3/4 of it
  CHECK(c.collectives[1].tensor == "W_in");
  CHECK(c.collectives[1].group == 2);
  CHECK(c.collectives[3].op == "reduce_scatter");
  CHECK(c.collectives[3].tensor == "y");
  double sum = 0;
  for (const auto& k : c.collectives) sum += k.seconds;
  CHECK(sum == doctest::Approx(c.comm_seconds));
  // Float64 doubles the data, so the bandwidth part of every collective.
  Hardware wide = h;
  wide.element_bytes = 8;
  CHECK(ffn_step_cost("gspmd", "X=2,Y=4", "article", false, wide).collectives[0].n_bytes == 10485760.0 * 8);
  const std::string text = step_cost_text(c, h);
  CHECK(text.find("all_gather") != std::string::npos);
  CHECK(text.find("% of the step") != std::string::npos);
  // Issue 18: size (the whole tensor) and sent (what a device sends) side by side, and which is which.
  // x: [4, 512, 5120] float32 after the gather = 40.0 MiB; a ring of 4 sends 3/4 of it = 30.0 MiB,
  // the figure lesson 08 prints for the same gather.
  CHECK(text.find("n  size       sent      modeled_us") != std::string::npos);
  CHECK(text.find("all_gather      x       Y     4  40.0 MiB   30.0 MiB") != std::string::npos);
  CHECK(text.find("sent: what one device sends over a ring of n") != std::string::npos);
  CHECK_THROWS_AS(ffn_step_cost("gspmd", "X=3,Y=4", "article", false, h), Error);  // B=8 on X=3
}

TEST_CASE("step cost: one device moves nothing and only computes") {
  const StepCost c = ffn_step_cost("pairwise", "D=1", "B=2,S=4,M=8,H=32", true, toy());
  CHECK(c.collectives.empty());
  CHECK(c.comm_seconds == 0);
  CHECK(c.compute_seconds == doctest::Approx(6 * 2.0 * 8 * 8 * 32 / 1e12));  // 2 products forward, 4 backward, 2 B S M H each
  CHECK(c.share() == 0);
}
