// harness/models/pipeline_clock.cpp: the logical clock and the timeline. Independent sources: the
// bubble formulas (P-1)/(m+P-1) and Megatron-LM's (P-1)/(v m+P-1), Megatron-LM's warm-up count,
// the GPipe paper's figure as article 004 shows it, and the unwrapped picture for the wrapped one.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "harness/models/pipeline.hpp"
#include "harness/models/pipeline_clock.hpp"

using namespace shardlab;

TEST_SUITE("pipeline_clock") {

TEST_CASE("pipeline: the logical clock's bubble is (P-1)/(m+P-1) for GPipe and 1F1B, whatever backward costs") {
  for (PipeSchedule s : {PipeSchedule::gpipe, PipeSchedule::one_f_one_b})
    for (int p : {1, 2, 3, 4, 8})
      for (int m : {1, 2, 4, 7, 32})
        for (double b_cost : {1.0, 2.0}) {
          CAPTURE(p);
          CAPTURE(m);
          const auto ticks = logical_clock(stage_orders(s, p, m), 1.0, b_cost);
          CHECK(ticks.size() == static_cast<std::size_t>(2 * p * m));
          CHECK(bubble_fraction(ticks, p) == doctest::Approx(double(p - 1) / (m + p - 1)).epsilon(1e-12));
        }
  CHECK(bubble_formula(4, 4) == doctest::Approx(3.0 / 7));
}

TEST_CASE("pipeline: the interleaved bubble is (P-1)/(v m+P-1), (P-1)/(v m) of the ideal time, whatever backward costs") {
  for (int p : {2, 3, 4, 8})
    for (int v : {2, 3, 4})
      for (int m : {p, 2 * p, 4 * p})
        for (double b_cost : {1.0, 2.0}) {
          CAPTURE(p);
          CAPTURE(v);
          CAPTURE(m);
          CAPTURE(b_cost);
          const auto ticks = logical_clock(stage_orders(PipeSchedule::interleaved, p, m, v), 1.0, b_cost);
          CHECK(ticks.size() == static_cast<std::size_t>(2 * p * m * v));
          const double bubble = bubble_fraction(ticks, p);
          CHECK(bubble == doctest::Approx(double(p - 1) / (v * m + p - 1)).epsilon(1e-12));
          CHECK(bubble / (1 - bubble) == doctest::Approx(double(p - 1) / (v * m)).epsilon(1e-12));
          CHECK(bubble_formula(p, m, v) == doctest::Approx(double(p - 1) / (v * m + p - 1)));
        }
  // Megatron-LM's warm-up on 4 devices with 8 micro-batches and 2 chunks: 2(P-s-1) + (v-1)P forwards.
  const auto o = stage_order(PipeSchedule::interleaved, 4, 8, 0, 2);
  for (int k = 0; k < 10; ++k) CHECK_FALSE(o[k].backward);
  CHECK(o[11].backward);
  CHECK(o[11].part == 1);  // the last chunk's backward first
  CHECK(o[4].part == 1);   // forwards: micro-batches 0-3 on chunk 0, then on chunk 1
  CHECK(o[4].chunk == 0);
}

TEST_CASE("pipeline: GPipe on 4 stages with chunks = 4 draws the article's figure") {
  const std::string want =
      "device 0 |F0,0 F0,1 F0,2 F0,3   .    .    .    .    .    .  B0,3 B0,2 B0,1 B0,0\n"
      "device 1 |  .  F1,0 F1,1 F1,2 F1,3   .    .    .    .  B1,3 B1,2 B1,1 B1,0   .\n"
      "device 2 |  .    .  F2,0 F2,1 F2,2 F2,3   .    .  B2,3 B2,2 B2,1 B2,0   .    .\n"
      "device 3 |  .    .    .  F3,0 F3,1 F3,2 F3,3 B3,3 B3,2 B3,1 B3,0   .    .    .\n";
  CHECK(timeline_picture(logical_clock(stage_orders(PipeSchedule::gpipe, 4, 4)), 4) == want);
}

TEST_CASE("pipeline: a timeline too long for one line wraps into bands or compresses, always within 100 columns") {
  auto widest = [](const std::string& text) {
    std::size_t most = 0, start = 0;
    for (std::size_t i = 0; i <= text.size(); ++i)
      if (i == text.size() || text[i] == '\n') {
        most = std::max(most, i - start);
        start = i + 1;
      }
    return most;
  };
  // 1F1B with 16 micro-batches on 4 stages: 38 ticks of 6-column cells ("F0,10"), 3 bands.
  const auto ticks = logical_clock(stage_orders(PipeSchedule::one_f_one_b, 4, 16));
  const std::string wrapped = timeline_picture(ticks, 4), whole = timeline_picture(ticks, 4, 1000);
  CHECK(widest(wrapped) <= 100);
  CHECK(widest(whole) > 100);
  CHECK(wrapped.find("ticks 0-12:\n") == 0);
  CHECK(wrapped.find("ticks 26-37:\n") != std::string::npos);
  // Each device's cells, band after band, are its row of the unwrapped picture.
  for (int s = 0; s < 4; ++s) {
    const std::string head = "device " + std::to_string(s) + " |";
    std::string joined, row;
    std::size_t at = 0;
    while ((at = wrapped.find(head, at)) != std::string::npos) {
      const std::size_t end = wrapped.find('\n', at);
      std::string cells = wrapped.substr(at + head.size(), end - at - head.size());
      if (!joined.empty()) joined.resize(((joined.size() + 5) / 6) * 6, ' ');  // trimmed band ends
      joined += cells;
      at = end;
    }
    const std::size_t w = whole.find(head);
    row = whole.substr(w + head.size(), whole.find('\n', w) - w - head.size());
    CHECK(joined == row);
  }
  // Longer runs: one character per k ticks; with k = 1 each device shows its m forwards and m
  // backwards (1F1B's steady state) and its idle ticks.
  for (int m : {40, 170, 1024}) {
    CAPTURE(m);
    const std::string pic = timeline_picture(logical_clock(stage_orders(PipeSchedule::one_f_one_b, 8, m)), 8);
    CHECK(widest(pic) <= 100);
    CHECK(pic.find("one character per") == 0);
    if (m == 40) {
      CHECK(pic.find("one character per 1 tick:") == 0);
      std::size_t f = 0, b = 0, idle = 0, at = 0;
      while ((at = pic.find("device 3 |", at)) != std::string::npos) {
        for (at += 10; at < pic.size() && pic[at] != '\n'; ++at) (pic[at] == 'F' ? f : pic[at] == 'B' ? b : idle) += 1;
      }
      CHECK(f == 40u);
      CHECK(b == 40u);
      CHECK(idle == 2u * 7);  // the bubble: P-1 ticks of fill and P-1 of drain on every device
    }
  }
}

TEST_CASE("pipeline: an order that cannot finish is an error, not a loop") {
  auto o = stage_orders(PipeSchedule::gpipe, 2, 2);
  std::reverse(o[1].begin(), o[1].end());  // stage 1 starts with a backward it has no forward for
  CHECK_THROWS_AS(logical_clock(o), Error);
}

}
