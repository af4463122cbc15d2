// harness/models/pipeline.cpp: schedules, the logical clock and the timeline. Independent sources:
// the bubble formulas (P-1)/(m+P-1) and Megatron-LM's (P-1)/(v m+P-1), the GPipe paper's figure as
// article 004 shows it, counts of stashed micro-batches and of messages made here by walking each
// schedule, and the unwrapped picture for the wrapped one.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <string>

#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "harness/models/pipeline.hpp"

using namespace shardlab;

namespace {
std::vector<std::vector<PipeOp>> orders(PipeSchedule s, int p, int m, int v = 1) {
  std::vector<std::vector<PipeOp>> o;
  for (int st = 0; st < p; ++st) o.push_back(stage_order(s, p, m, st, v));
  return o;
}
// The most micro-batches (with their model chunk) between forward and backward at once, walking the order.
int stashed(const std::vector<PipeOp>& order) {
  std::set<std::pair<int, int>> live;
  std::size_t most = 0;
  for (const auto& op : order) {
    if (op.backward) live.erase({op.part, op.chunk});
    else live.insert({op.part, op.chunk});
    most = std::max(most, live.size());
  }
  return static_cast<int>(most);
}
// What each device sends to each other device, in its order, and what each receives from each, in
// its order: (kind, micro-batch, virtual stage the message is for). Point-to-point messages between
// two devices are taken first in, first out, so a run is right only where the two lists agree.
using Messages = std::map<std::pair<int, int>, std::vector<std::tuple<char, int, int>>>;
std::pair<Messages, Messages> messages(const std::vector<std::vector<PipeOp>>& o, int v) {
  const int p = static_cast<int>(o.size()), last = p * v - 1;
  Messages sent, received;
  for (int s = 0; s < p; ++s)
    for (const auto& op : o[s]) {
      const int vs = op.part * p + s;
      if (!op.backward && vs > 0) received[{(vs - 1) % p, s}].push_back({'a', op.chunk, vs});
      if (op.backward && vs < last) received[{(vs + 1) % p, s}].push_back({'g', op.chunk, vs});
      if (!op.backward && vs < last) sent[{s, (vs + 1) % p}].push_back({'a', op.chunk, vs + 1});
      if (op.backward && vs > 0) sent[{s, (vs - 1) % p}].push_back({'g', op.chunk, vs - 1});
    }
  return {sent, received};
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

TEST_CASE("pipeline: interleaved runs each micro-batch through each model chunk once, forward then backward") {
  for (int p : {2, 3, 4, 5})
    for (int v : {2, 3, 4})
      for (int m : {p, 2 * p, 3 * p}) {
        CAPTURE(p);
        CAPTURE(v);
        CAPTURE(m);
        int messages_total = 0;
        for (int st = 0; st < p; ++st) {
          const auto o = stage_order(PipeSchedule::interleaved, p, m, st, v);
          REQUIRE(o.size() == static_cast<std::size_t>(2 * m * v));
          std::set<std::pair<int, int>> f, b;
          int sends = 0;
          for (const auto& op : o) {
            REQUIRE(op.part >= 0);
            REQUIRE(op.part < v);
            const int vs = op.part * p + st;
            if (op.backward) {
              CHECK(f.count({op.part, op.chunk}) == 1);
              b.insert({op.part, op.chunk});
              sends += vs > 0;
            } else {
              f.insert({op.part, op.chunk});
              sends += vs < p * v - 1;
            }
          }
          CHECK(f.size() == static_cast<std::size_t>(m * v));
          CHECK(b.size() == static_cast<std::size_t>(m * v));
          CHECK(stashed(o) == stash_formula(PipeSchedule::interleaved, p, m, st, v));
          PipelineConfig c;
          c.stages = p;
          c.chunks = m;
          c.virtual_stages = v;
          c.schedule = PipeSchedule::interleaved;
          CHECK(sends == messages_formula(c, st));
          messages_total += sends;
        }
        CHECK(messages_total == 2 * m * (v * p - 1));  // v times 1F1B's 2m(P-1), nearly
        // Every pair of devices agrees on the order of what passes between them (P = 2 sends both
        // activations and gradients each way).
        const auto [sent, received] = messages(orders(PipeSchedule::interleaved, p, m, v), v);
        CHECK(sent == received);
      }
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
          const auto ticks = logical_clock(orders(PipeSchedule::interleaved, p, m, v), 1.0, b_cost);
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
  CHECK(timeline_picture(logical_clock(orders(PipeSchedule::gpipe, 4, 4)), 4) == want);
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
  const auto ticks = logical_clock(orders(PipeSchedule::one_f_one_b, 4, 16));
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
    const std::string pic = timeline_picture(logical_clock(orders(PipeSchedule::one_f_one_b, 8, m)), 8);
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
  PipelineConfig c4 = c;
  c4.virtual_stages = 2;
  bad(c4, "--virtual-stages applies to the interleaved schedule only");
  PipelineConfig c5 = c;
  c5.schedule = PipeSchedule::interleaved;
  bad(c5, "--virtual-stages 2 to 16, not 1");
  c5.virtual_stages = 2;
  CHECK_NOTHROW(check_pipeline(c5));
  c5.chunks = 6;
  bad(c5, "--chunks 6 must be a multiple of --stages 4");
  c5.chunks = 8;
  c5.virtual_stages = 4;
  bad(c5, "8 layers do not split evenly over 4 stages x 4 virtual stages");
  CHECK_THROWS_AS(parse_schedule("pipedream"), Error);
  CHECK(parse_schedule("1f1b") == PipeSchedule::one_f_one_b);
  CHECK(parse_schedule("interleaved") == PipeSchedule::interleaved);
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

TEST_CASE("pipeline: interleaved runs give the whole batch's gradients, P = 2 (messages both ways) included") {
  for (auto [p, v, m] : {std::tuple{2, 2, 4}, std::tuple{4, 2, 8}, std::tuple{2, 4, 2}}) {
    CAPTURE(p);
    CAPTURE(v);
    PipelineConfig c;
    c.stages = p;
    c.virtual_stages = v;
    c.chunks = m;
    c.schedule = PipeSchedule::interleaved;
    const PipeInputs in = pipeline_inputs(c);
    const PipeReference ref = pipeline_reference(c, in, DType::float64);
    Runtime rt(Backend::sim, false, DType::float64);
    const RunResult r = rt.run(Mesh::parse("X=" + std::to_string(p)), pipeline_program(c, in));
    for (int l = 0; l < c.layers; ++l) {
      // Layer l is in virtual stage l / (L / (P v)), on device (that) mod P.
      const int device = (l / (c.layers / (p * v))) % p;
      CHECK(device_of_layer(c, l) == device);
      const Tensor& got = r.outputs[device].at("dW" + std::to_string(l));
      CHECK(xt::amax(xt::abs(got - ref.grads[l]))() <= 1e-13);
      CHECK(xt::amax(xt::abs(ref.grads[l]))() > 1e-3);  // a gradient worth checking
    }
    const auto ran = executed_orders(r, p);
    for (int s = 0; s < p; ++s) {
      const auto want = stage_order(c.schedule, p, m, s, v);
      REQUIRE(ran[s].size() == want.size());
      for (std::size_t i = 0; i < want.size(); ++i) CHECK((ran[s][i].part == want[i].part && ran[s][i].chunk == want[i].chunk));
    }
  }
}

}  // TEST_SUITE

// Issue 32: 7 layers on 4 stages (torch.chunk: 2, 2, 2, 1) and a batch of 7 rows in 3 micro-batches
// (chunk: 3, 3, 1; pad: 3 each, 2 zero rows in the last). Gradients against backpropagation over
// the whole batch written here (float64: exact up to the order of sums), bytes per stage against
// the rows each micro-batch is sent as.
TEST_CASE("pipeline --uneven chunk|pad: 7 layers on 4 stages, a batch of 7 in 3 micro-batches") {
  for (Uneven u : {Uneven::chunk, Uneven::pad})
    for (PipeSchedule sched : {PipeSchedule::gpipe, PipeSchedule::one_f_one_b}) {
      CAPTURE(uneven_name(u));
      CAPTURE(schedule_name(sched));
      PipelineConfig c;
      c.layers = 7;
      c.chunks = 3;
      c.batch = 7;
      c.schedule = sched;
      c.uneven = u;
      CHECK(stage_layers(c) == std::vector<int>{2, 2, 2, 1});
      CHECK(micro_batch_rows(c) == std::vector<std::size_t>{3, 3, 1});
      const PipeInputs in = pipeline_inputs(c);
      // The whole batch: h_{l+1} = tanh(h_l W_l), L = sum(h_L * R); dW_l = h_l^T (dh_{l+1} (1 - h_{l+1}^2)),
      // with plain loops over the rows of every micro-batch in order.
      std::vector<std::vector<double>> x, r;  // 7 rows of 8
      for (int k = 0; k < 3; ++k)
        for (std::size_t i = 0; i < in.x[k].shape()[0]; ++i) {
          x.emplace_back(in.x[k].data() + i * 8, in.x[k].data() + i * 8 + 8);
          r.emplace_back(in.r[k].data() + i * 8, in.r[k].data() + i * 8 + 8);
        }
      REQUIRE(x.size() == 7);
      std::vector<std::vector<std::vector<double>>> h = {x};  // h[l][row][col]
      for (int l = 0; l < 7; ++l) {
        auto next = h.back();
        for (std::size_t i = 0; i < 7; ++i)
          for (std::size_t j = 0; j < 8; ++j) {
            double sum = 0;
            for (std::size_t k = 0; k < 8; ++k) sum += h.back()[i][k] * in.weights[l](k, j);
            next[i][j] = std::tanh(sum);
          }
        h.push_back(next);
      }
      std::vector<std::vector<std::vector<double>>> want(7, std::vector<std::vector<double>>(8, std::vector<double>(8, 0.0)));
      auto dh = r;
      for (int l = 6; l >= 0; --l) {
        auto dpre = dh;
        for (std::size_t i = 0; i < 7; ++i)
          for (std::size_t j = 0; j < 8; ++j) dpre[i][j] = dh[i][j] * (1.0 - h[l + 1][i][j] * h[l + 1][i][j]);
        for (std::size_t a = 0; a < 8; ++a)
          for (std::size_t b = 0; b < 8; ++b)
            for (std::size_t i = 0; i < 7; ++i) want[l][a][b] += h[l][i][a] * dpre[i][b];
        for (std::size_t i = 0; i < 7; ++i)
          for (std::size_t k = 0; k < 8; ++k) {
            double sum = 0;
            for (std::size_t j = 0; j < 8; ++j) sum += dpre[i][j] * in.weights[l](k, j);
            dh[i][k] = sum;
          }
      }
      Runtime rt(Backend::sim, false, DType::float64);
      Mesh mesh = Mesh::parse("X=4");
      mesh.set_uneven(u);
      const RunResult run = rt.run(mesh, pipeline_program(c, in));
      const int holder[7] = {0, 0, 1, 1, 2, 2, 3};
      for (int l = 0; l < 7; ++l) {
        CHECK(device_of_layer(c, l) == holder[l]);
        const Tensor& got = run.outputs[holder[l]].at("dW" + std::to_string(l));
        double worst = 0;
        for (std::size_t a = 0; a < 8; ++a)
          for (std::size_t b = 0; b < 8; ++b) worst = std::max(worst, std::fabs(got(a, b) - want[l][a][b]));
        CHECK(worst <= 1e-12);
      }
      // Each stage sends every micro-batch's activation on (but the last) and gradient back (but the
      // first): 7 rows of 8 float64 columns each way (chunk), 9 (pad: 3 x 3).
      const double rows = u == Uneven::chunk ? 7 : 9, one_way = rows * 8 * 8;
      std::vector<double> sent(4, 0);
      for (const auto& row : run.ledger) sent[row.device] += static_cast<double>(row.bytes_sent);
      CHECK(sent == std::vector<double>{one_way, 2 * one_way, 2 * one_way, one_way});
    }
  PipelineConfig c;
  c.layers = 7;
  CHECK_THROWS_AS(check_pipeline(c), Error);  // none (the default) keeps the refusal
  c.batch = 7;
  c.layers = 8;
  CHECK_THROWS_AS(check_pipeline(c), Error);
  c.uneven = Uneven::chunk;
  CHECK_NOTHROW(check_pipeline(c));
  c.schedule = PipeSchedule::interleaved;  // uneven layers need one model chunk per device
  c.virtual_stages = 2;
  c.chunks = 4;
  c.layers = 9;
  CHECK_THROWS_AS(check_pipeline(c), Error);
}
