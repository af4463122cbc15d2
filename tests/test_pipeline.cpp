// harness/models/pipeline.cpp: schedules, the logical clock and the timeline. Independent sources:
// the bubble formula (P-1)/(m+P-1), the GPipe paper's figure as article 004 shows it, and a
// count of stashed micro-batches made here by walking each schedule.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>

#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "harness/models/pipeline.hpp"

using namespace shardlab;

namespace {
std::vector<std::vector<PipeOp>> orders(PipeSchedule s, int p, int m) {
  std::vector<std::vector<PipeOp>> o;
  for (int st = 0; st < p; ++st) o.push_back(stage_order(s, p, m, st));
  return o;
}
// The most micro-batches between their forward and backward at once, walking the order.
int stashed(const std::vector<PipeOp>& order) {
  std::set<int> live;
  std::size_t most = 0;
  for (const auto& op : order) {
    if (op.backward) live.erase(op.chunk);
    else live.insert(op.chunk);
    most = std::max(most, live.size());
  }
  return static_cast<int>(most);
}
}  // namespace

TEST_SUITE("pipeline") {

TEST_CASE("pipeline: every schedule runs each micro-batch's forward then its backward, once, on every stage") {
  for (PipeSchedule s : {PipeSchedule::gpipe, PipeSchedule::one_f_one_b})
    for (int p : {1, 2, 4, 5})
      for (int m : {1, 3, 4, 9}) {
        for (int st = 0; st < p; ++st) {
          const auto o = stage_order(s, p, m, st);
          REQUIRE(o.size() == static_cast<std::size_t>(2 * m));
          std::set<int> f, b;
          for (const auto& op : o) {
            if (op.backward) {
              CHECK(f.count(op.chunk) == 1);  // after its forward
              b.insert(op.chunk);
            } else {
              f.insert(op.chunk);
            }
          }
          CHECK(f.size() == static_cast<std::size_t>(m));
          CHECK(b.size() == static_cast<std::size_t>(m));
          CHECK(stashed(o) == stash_formula(s, p, m, st));
        }
      }
}

TEST_CASE("pipeline: the logical clock's bubble is (P-1)/(m+P-1) for GPipe and 1F1B, whatever backward costs") {
  for (PipeSchedule s : {PipeSchedule::gpipe, PipeSchedule::one_f_one_b})
    for (int p : {1, 2, 3, 4, 8})
      for (int m : {1, 2, 4, 7, 32})
        for (double b_cost : {1.0, 2.0}) {
          CAPTURE(p);
          CAPTURE(m);
          const auto ticks = logical_clock(orders(s, p, m), 1.0, b_cost);
          CHECK(ticks.size() == static_cast<std::size_t>(2 * p * m));
          CHECK(bubble_fraction(ticks, p) == doctest::Approx(double(p - 1) / (m + p - 1)).epsilon(1e-12));
        }
  CHECK(bubble_formula(4, 4) == doctest::Approx(3.0 / 7));
}

TEST_CASE("pipeline: GPipe on 4 stages with chunks = 4 draws the article's figure") {
  const std::string want =
      "device 0 |F0,0 F0,1 F0,2 F0,3   .    .    .    .    .    .  B0,3 B0,2 B0,1 B0,0\n"
      "device 1 |  .  F1,0 F1,1 F1,2 F1,3   .    .    .    .  B1,3 B1,2 B1,1 B1,0   .\n"
      "device 2 |  .    .  F2,0 F2,1 F2,2 F2,3   .    .  B2,3 B2,2 B2,1 B2,0   .    .\n"
      "device 3 |  .    .    .  F3,0 F3,1 F3,2 F3,3 B3,3 B3,2 B3,1 B3,0   .    .    .\n";
  CHECK(timeline_picture(logical_clock(orders(PipeSchedule::gpipe, 4, 4)), 4) == want);
}

TEST_CASE("pipeline: an order that cannot finish is an error, not a loop") {
  auto o = orders(PipeSchedule::gpipe, 2, 2);
  std::reverse(o[1].begin(), o[1].end());  // stage 1 starts with a backward it has no forward for
  CHECK_THROWS_AS(logical_clock(o), Error);
}

TEST_CASE("pipeline: bad configurations are one sentence each") {
  PipelineConfig c;
  CHECK_NOTHROW(check_pipeline(c));
  auto bad = [](PipelineConfig c, const std::string& part) {
    try {
      check_pipeline(c);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find(part) != std::string::npos);
    }
  };
  PipelineConfig c1 = c;
  c1.layers = 7;
  bad(c1, "7 layers do not split evenly over 4 stages");
  PipelineConfig c2 = c;
  c2.schedule = PipeSchedule::naive;
  bad(c2, "--chunks must be 1");
  PipelineConfig c3 = c;
  c3.chunks = 0;
  bad(c3, "--chunks must be 1 to 1024");
  CHECK_THROWS_AS(parse_schedule("pipedream"), Error);
  CHECK(parse_schedule("1f1b") == PipeSchedule::one_f_one_b);
}

TEST_CASE("pipeline: the run's gradients equal the whole batch's, and its order is the schedule's") {
  PipelineConfig c;
  c.schedule = PipeSchedule::one_f_one_b;
  const PipeInputs in = pipeline_inputs(c);
  const PipeReference ref = pipeline_reference(c, in, DType::float64);
  Runtime rt(Backend::sim, false, DType::float64);
  const RunResult r = rt.run(Mesh::parse("X=4"), pipeline_program(c, in));
  for (int l = 0; l < c.layers; ++l) {
    const Tensor& got = r.outputs[l / 2].at("dW" + std::to_string(l));
    CHECK(xt::amax(xt::abs(got - ref.grads[l]))() <= 1e-13);
  }
  for (int s = 0; s < 4; ++s) {
    const auto want = stage_order(c.schedule, 4, 4, s);
    const Tensor& order = r.outputs[s].at("order");
    REQUIRE(order.shape()[0] == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      CHECK((order(i, 0) != 0) == want[i].backward);
      CHECK(order(i, 1) == want[i].chunk);
    }
  }
}

}  // TEST_SUITE
