// harness/models/pipeline.cpp: schedules, the configurations refused, and the run. Independent
// sources: counts of stashed micro-batches and of messages made here by walking each schedule, and
// the whole batch's gradients on one device.
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
        const auto [sent, received] = messages(stage_orders(PipeSchedule::interleaved, p, m, v), v);
        CHECK(sent == received);
      }
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
