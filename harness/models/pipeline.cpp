#include "harness/models/pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <xtensor/xmath.hpp>

#include "collectives/collectives.hpp"
#include "core/einsum.hpp"
#include "core/error.hpp"
#include "core/ops.hpp"
#include "core/trace.hpp"
#include "harness/models/training.hpp"

namespace shardlab {

PipeSchedule parse_schedule(const std::string& text) {
  if (text == "naive") return PipeSchedule::naive;
  if (text == "gpipe") return PipeSchedule::gpipe;
  if (text == "1f1b") return PipeSchedule::one_f_one_b;
  throw Error(ErrorKind::parse, "schedule '" + text + "' is not known; use naive, gpipe or 1f1b");
}

std::string schedule_name(PipeSchedule s) {
  switch (s) {
    case PipeSchedule::naive: return "naive";
    case PipeSchedule::gpipe: return "gpipe";
    case PipeSchedule::one_f_one_b: return "1f1b";
  }
  return "?";
}

void check_pipeline(const PipelineConfig& c) {
  if (c.stages < 1 || c.stages > 64) throw Error(ErrorKind::parse, "--stages must be 1 to 64, not " + std::to_string(c.stages));
  if (c.chunks < 1 || c.chunks > 1024) throw Error(ErrorKind::parse, "--chunks must be 1 to 1024, not " + std::to_string(c.chunks));
  if (c.layers < 1 || c.layers > 16)
    throw Error(ErrorKind::parse, "--layers must be 1 to 16, not " + std::to_string(c.layers) +
                                      ": deeper plain tanh stacks make the gradients' rounding bound (sums of |terms|) "
                                      "outgrow the gradients, so the check would prove nothing");
  if (c.width < 1 || c.width > 512) throw Error(ErrorKind::parse, "--width must be 1 to 512, not " + std::to_string(c.width));
  if (c.micro_batch < 1 || c.micro_batch > 4096)
    throw Error(ErrorKind::parse, "--micro-batch must be 1 to 4096, not " + std::to_string(c.micro_batch));
  if (c.schedule == PipeSchedule::naive && c.chunks != 1)
    throw Error(ErrorKind::parse, "the naive schedule runs the whole batch at once: --chunks must be 1 (or use gpipe)");
  if (c.layers % c.stages != 0)
    throw Error(ErrorKind::not_divisible, std::to_string(c.layers) + " layers do not split evenly over " +
                                              std::to_string(c.stages) + " stages");
}

std::vector<PipeOp> stage_order(PipeSchedule s, int stages, int chunks, int stage) {
  std::vector<PipeOp> out;
  if (s != PipeSchedule::one_f_one_b) {
    for (int c = 0; c < chunks; ++c) out.push_back({false, c});
    for (int c = chunks - 1; c >= 0; --c) out.push_back({true, c});
    return out;
  }
  const int warmup = std::min(stages - stage - 1, chunks);
  for (int c = 0; c < warmup; ++c) out.push_back({false, c});
  for (int i = 0; i < chunks - warmup; ++i) {
    out.push_back({false, warmup + i});
    out.push_back({true, i});
  }
  for (int c = chunks - warmup; c < chunks; ++c) out.push_back({true, c});
  return out;
}

int stash_formula(PipeSchedule s, int stages, int chunks, int stage) {
  if (s == PipeSchedule::one_f_one_b) return std::min(stages - stage, chunks);
  return chunks;
}

PipeInputs pipeline_inputs(const PipelineConfig& c) {
  check_pipeline(c);
  PipeInputs in;
  // Multiples of 1/64 of about 1.1/sqrt(D) at most (std 0.6/sqrt(D)): tanh stays unsaturated and the
  // gradients neither vanish nor explode over the few dozen layers allowed.
  const int w = std::max(1, static_cast<int>(std::lround(70 / std::sqrt(double(c.width)))));
  for (int l = 0; l < c.layers; ++l)
    in.weights.push_back(random_integers(Shape{c.width, c.width}, c.seed + 1 + l, -w, w) / 64.0);
  for (int k = 0; k < c.chunks; ++k) {
    in.x.push_back(random_integers(Shape{c.micro_batch, c.width}, c.seed + 1000 + 2 * k, -64, 64) / 64.0);
    in.r.push_back(random_integers(Shape{c.micro_batch, c.width}, c.seed + 1001 + 2 * k, -64, 64) / 64.0);
  }
  return in;
}

PipeReference pipeline_reference(const PipelineConfig& c, const PipeInputs& in, DType wire) {
  Tensor x = in.x[0], r = in.r[0];
  for (std::size_t k = 1; k < in.x.size(); ++k) {
    x = xt::concatenate(xt::xtuple(x, in.x[k]), 0);
    r = xt::concatenate(xt::xtuple(r, in.r[k]), 0);
  }
  // The messages round where the stages send them: a stage's output activation as the next
  // stage's input, and the gradient of a stage's input as the previous stage's. The reference
  // rounds the same values at the same places, so what is left between the two is float64's order
  // of sums (the micro-batches' gradients added one by one, against one product over the batch).
  const int per = c.layers / c.stages;
  std::vector<Tensor> ins = {x}, outs;  // each layer's input (as the layer reads it) and output
  for (int l = 0; l < c.layers; ++l) {
    outs.push_back(xt::tanh(Tensor(matmul(ins.back(), in.weights[l]))));
    ins.push_back((l + 1) % per == 0 ? rounded(outs.back(), wire) : outs.back());
  }
  PipeReference ref;
  ref.grads.resize(c.layers);
  ref.tolerance.resize(c.layers);
  const double bound = 16.0 * (c.layers + 2) * unit_roundoff(DType::float64);
  Tensor dz = r, dz_size = xt::abs(r);  // gradient at the current layer's output, and its terms' sizes
  for (int l = c.layers - 1; l >= 0; --l) {
    const Tensor& out = outs[l];
    const Tensor slope = 1.0 - out * out;
    const Tensor dpre = dz * slope, dpre_size = dz_size * xt::abs(slope);
    ref.grads[l] = matmul(transposed(ins[l]), dpre);
    ref.tolerance[l] = bound * matmul(transposed(xt::abs(ins[l])), dpre_size);
    dz = matmul(dpre, transposed(in.weights[l]));
    if (l % per == 0) dz = rounded(dz, wire);
    dz_size = matmul(dpre_size, transposed(xt::abs(in.weights[l])));
  }
  return ref;
}

Program pipeline_program(const PipelineConfig& c, const PipeInputs& in) {
  return [c, &in](Device& dev) -> Outputs {
    if (dev.id() >= c.stages) return {};  // a mesh larger than the pipeline: the rest stay idle
    const int s = dev.id(), p = c.stages, per = c.layers / c.stages, first = s * per;
    const Shape block{c.micro_batch, c.width};
    std::vector<Tensor> grads(per);
    for (auto& g : grads) g = xt::zeros<double>(Shape{c.width, c.width});
    std::map<int, std::vector<Tensor>> stash;  // micro-batch -> the input of each layer, then the output
    std::size_t peak = 0;
    const auto order = stage_order(c.schedule, p, c.chunks, s);
    Tensor ran = xt::zeros<double>(Shape{order.size(), 2}), wall = xt::zeros<double>(Shape{order.size(), 2});
    for (std::size_t i = 0; i < order.size(); ++i) {
      const PipeOp op = order[i];
      const std::string label = std::string(op.backward ? "B" : "F") + std::to_string(s) + "," + std::to_string(op.chunk);
      const std::string tag = "_c" + std::to_string(op.chunk);
      // The op's input arrives first; its time (and its span) start once the input is here, so
      // waiting for a neighbour counts as idle, not as work.
      Tensor input;
      if (!op.backward) input = s == 0 ? in.x[op.chunk] : recv(dev, s - 1, block, "act" + tag);
      else input = s == p - 1 ? in.r[op.chunk] : recv(dev, s + 1, block, "grad" + tag);
      TraceSpan span(label, [&] { return std::string(op.backward ? "backward" : "forward") + " of micro-batch " +
                                         std::to_string(op.chunk) + " on stage " + std::to_string(s); });
      wall(i, 0) = trace_now_us();
      if (!op.backward) {
        std::vector<Tensor> acts = {input};
        for (int l = 0; l < per; ++l) acts.push_back(unary_op("tanh", matmul(acts.back(), in.weights[first + l])));
        if (s < p - 1) send(dev, acts.back(), s + 1, "act" + tag);
        stash[op.chunk] = std::move(acts);
        peak = std::max(peak, stash.size());
      } else {
        const auto it = stash.find(op.chunk);
        if (it == stash.end())
          throw Error(ErrorKind::unsupported, "stage " + std::to_string(s) + " runs " + label + " before its forward");
        auto from = it;  // --inject swap-microbatches: another micro-batch's stashed activations
        for (auto o = stash.begin(); o != stash.end(); ++o)
          if (o != it && from == it && dev.strike(FaultKind::swap_microbatches)) from = o;
        const std::vector<Tensor>& acts = from->second;
        Tensor dz = input;
        for (int l = per - 1; l >= 0; --l) {
          const Tensor& out = acts[l + 1];
          const Tensor dpre = dz * (1.0 - out * out);
          grads[l] += matmul(transposed(acts[l]), dpre);  // accumulated over the micro-batches
          dz = matmul(dpre, transposed(in.weights[first + l]));
        }
        if (s > 0) send(dev, dz, s - 1, "grad" + tag);
        stash.erase(it);
      }
      wall(i, 1) = trace_now_us();
      ran(i, 0) = op.backward ? 1 : 0;
      ran(i, 1) = op.chunk;
    }
    Outputs out = {{"order", ran}, {"wall", wall}, {"peak_stash", Tensor{double(peak)}}};
    for (int l = 0; l < per; ++l) out["dW" + std::to_string(first + l)] = grads[l];
    return out;
  };
}

std::vector<std::vector<PipeOp>> executed_orders(const RunResult& run, int stages) {
  std::vector<std::vector<PipeOp>> out;
  for (int s = 0; s < stages; ++s) {
    const Tensor& order = run.outputs.at(s).at("order");
    std::vector<PipeOp> ops;
    for (std::size_t i = 0; i < order.shape()[0]; ++i) ops.push_back({order(i, 0) != 0, static_cast<int>(order(i, 1))});
    out.push_back(ops);
  }
  return out;
}

std::vector<TimedOp> logical_clock(const std::vector<std::vector<PipeOp>>& orders, double f_cost, double b_cost) {
  const int p = static_cast<int>(orders.size());
  std::map<std::tuple<int, bool, int>, double> done;  // (stage, backward, chunk) -> end
  std::vector<std::size_t> next(p, 0);
  std::vector<double> free(p, 0);
  std::vector<TimedOp> out;
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < p; ++s) {
      while (next[s] < orders[s].size()) {
        const PipeOp op = orders[s][next[s]];
        // What this op waits for: the neighbour's op on the same micro-batch (and, for a backward,
        // this stage's own forward).
        std::vector<std::tuple<int, bool, int>> needs;
        if (!op.backward && s > 0) needs.push_back({s - 1, false, op.chunk});
        if (op.backward) {
          needs.push_back({s, false, op.chunk});
          if (s < p - 1) needs.push_back({s + 1, true, op.chunk});
        }
        double ready = free[s];
        bool ok = true;
        for (const auto& n : needs) {
          const auto it = done.find(n);
          if (it == done.end()) ok = false;
          else ready = std::max(ready, it->second);
        }
        if (!ok) break;
        const double end = ready + (op.backward ? b_cost : f_cost);
        done[{s, op.backward, op.chunk}] = end;
        free[s] = end;
        out.push_back({s, op, ready, end});
        ++next[s];
        moved = true;
      }
    }
  }
  for (int s = 0; s < p; ++s)
    if (next[s] < orders[s].size())
      throw Error(ErrorKind::mismatch, "the stages' orders cannot finish: stage " + std::to_string(s) + " waits at its op " +
                                           std::to_string(next[s] + 1) + " for an input no stage produces first");
  return out;
}

double bubble_fraction(const std::vector<TimedOp>& ops, int stages) {
  double busy = 0, makespan = 0;
  for (const auto& o : ops) {
    busy += o.end - o.start;
    makespan = std::max(makespan, o.end);
  }
  // Idle over total, each a whole number of ticks: one rounding, like the formula's.
  return makespan > 0 ? (stages * makespan - busy) / (stages * makespan) : 0.0;
}

double bubble_formula(int stages, int chunks) { return double(stages - 1) / double(chunks + stages - 1); }

std::string timeline_picture(const std::vector<TimedOp>& ops, int stages) {
  double makespan = 0;
  for (const auto& o : ops) makespan = std::max(makespan, o.end);
  const int ticks = static_cast<int>(std::ceil(makespan));
  std::vector<std::vector<std::string>> cells(stages, std::vector<std::string>(ticks, "  .  "));
  for (const auto& o : ops) {
    const std::string label = std::string(o.op.backward ? "B" : "F") + std::to_string(o.stage) + "," + std::to_string(o.op.chunk);
    for (int t = static_cast<int>(o.start); t < static_cast<int>(std::ceil(o.end)); ++t) {
      std::string cell = t == static_cast<int>(o.start) ? label : std::string(label.size(), '-');
      cell.resize(5, ' ');
      cells[o.stage][t] = cell;
    }
  }
  std::string out;
  for (int s = 0; s < stages; ++s) {
    out += "device " + std::to_string(s) + " |";
    for (const auto& c : cells[s]) out += c;
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += "\n";
  }
  return out;
}

}  // namespace shardlab
