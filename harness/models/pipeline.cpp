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
  if (text == "interleaved") return PipeSchedule::interleaved;
  throw Error(ErrorKind::parse, "schedule '" + text + "' is not known; use naive, gpipe, 1f1b or interleaved");
}

std::string schedule_name(PipeSchedule s) {
  switch (s) {
    case PipeSchedule::naive: return "naive";
    case PipeSchedule::gpipe: return "gpipe";
    case PipeSchedule::one_f_one_b: return "1f1b";
    case PipeSchedule::interleaved: return "interleaved";
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
  const int v = c.virtual_stages;
  if (c.schedule != PipeSchedule::interleaved && v != 1)
    throw Error(ErrorKind::parse, "--virtual-stages applies to the interleaved schedule only (" + schedule_name(c.schedule) +
                                      " holds one model chunk per device)");
  if (c.schedule == PipeSchedule::interleaved) {
    if (v < 2 || v > 16)
      throw Error(ErrorKind::parse, "the interleaved schedule needs --virtual-stages 2 to 16, not " + std::to_string(v) +
                                        " (one model chunk per device is 1f1b)");
    if (c.stages < 2) throw Error(ErrorKind::parse, "the interleaved schedule needs at least 2 stages");
    if (c.chunks % c.stages != 0)
      throw Error(ErrorKind::parse, "the interleaved schedule runs micro-batches in groups of the stages: --chunks " +
                                        std::to_string(c.chunks) + " must be a multiple of --stages " + std::to_string(c.stages));
  }
  if (c.layers % (c.stages * v) != 0 && (c.uneven == Uneven::none || v > 1))
    throw Error(ErrorKind::not_divisible, std::to_string(c.layers) + " layers do not split evenly over " +
                                              std::to_string(c.stages) + " stages" +
                                              (v > 1 ? " x " + std::to_string(v) + " virtual stages" : std::string()) +
                                              (v > 1 ? "" : "; give --uneven chunk or pad"));
  if (c.batch > 0) {
    if (c.batch > 1u << 20) throw Error(ErrorKind::parse, "--batch must be 1 to 1048576, not " + std::to_string(c.batch));
    if (c.batch < static_cast<std::size_t>(c.chunks))
      throw Error(ErrorKind::parse, "--batch " + std::to_string(c.batch) + " has fewer rows than --chunks " +
                                        std::to_string(c.chunks) + ": every micro-batch needs a row");
    if (c.batch % static_cast<std::size_t>(c.chunks) != 0 && c.uneven == Uneven::none)
      throw Error(ErrorKind::not_divisible, "a batch of " + std::to_string(c.batch) + " rows does not split evenly into " +
                                                std::to_string(c.chunks) + " micro-batches; give --uneven chunk or pad");
  }
}

std::vector<int> stage_layers(const PipelineConfig& c) {
  const std::size_t vs = static_cast<std::size_t>(c.stages * c.virtual_stages);
  std::vector<int> out;
  for (std::size_t n : chunk_counts(static_cast<std::size_t>(c.layers), vs)) out.push_back(static_cast<int>(n));
  return out;  // the even cut when it divides
}

int first_layer(const PipelineConfig& c, int virtual_stage) {
  const auto per = stage_layers(c);
  int first = 0;
  for (int k = 0; k < virtual_stage; ++k) first += per[static_cast<std::size_t>(k)];
  return first;
}

std::vector<std::size_t> micro_batch_rows(const PipelineConfig& c) {
  if (c.batch == 0) return std::vector<std::size_t>(static_cast<std::size_t>(c.chunks), c.micro_batch);
  return chunk_counts(c.batch, static_cast<std::size_t>(c.chunks));
}

std::size_t micro_batch_stored(const PipelineConfig& c, int chunk) {
  const auto rows = micro_batch_rows(c);
  return c.uneven == Uneven::pad ? rows[0] : rows[static_cast<std::size_t>(chunk)];
}

namespace {
// Megatron-LM's interleaved 1F1B for device `s`: the k-th forward (and the k-th backward) of the
// v m it runs. Micro-batches go in groups of P; within a group, model chunk by model chunk
// (forwards first chunk first, backwards last chunk first).
std::vector<PipeOp> interleaved_order(int p, int m, int s, int v) {
  const int total = m * v;
  const int warmup = m == p ? total : std::min(2 * (p - s - 1) + (v - 1) * p, total);
  auto nth = [&](int k, bool backward) {
    const int part = (k % (p * v)) / p;
    return PipeOp{backward, (k / (p * v)) * p + k % p, backward ? v - 1 - part : part};
  };
  std::vector<PipeOp> out;
  for (int k = 0; k < warmup; ++k) out.push_back(nth(k, false));
  for (int i = 0; i < total - warmup; ++i) {
    out.push_back(nth(warmup + i, false));
    out.push_back(nth(i, true));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(nth(k, true));
  return out;
}
}  // namespace

std::vector<PipeOp> stage_order(PipeSchedule s, int stages, int chunks, int stage, int virtual_stages) {
  if (s == PipeSchedule::interleaved) return interleaved_order(stages, chunks, stage, virtual_stages);
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

std::vector<std::vector<PipeOp>> stage_orders(PipeSchedule s, int stages, int chunks, int virtual_stages) {
  std::vector<std::vector<PipeOp>> out;
  for (int st = 0; st < stages; ++st) out.push_back(stage_order(s, stages, chunks, st, virtual_stages));
  return out;
}

int stash_formula(PipeSchedule s, int stages, int chunks, int stage, int virtual_stages) {
  if (s == PipeSchedule::one_f_one_b) return std::min(stages - stage, chunks);
  if (s == PipeSchedule::interleaved) {
    const int v = virtual_stages, total = v * chunks;
    return chunks == stages ? total : std::min(2 * (stages - stage - 1) + (v - 1) * stages + 1, total);
  }
  return chunks;
}

int messages_formula(const PipelineConfig& c, int stage) {
  const int v = c.virtual_stages;
  return c.chunks * ((v - (stage == c.stages - 1 ? 1 : 0)) + (v - (stage == 0 ? 1 : 0)));
}

int device_of_layer(const PipelineConfig& c, int layer) {
  const auto per = stage_layers(c);
  int vs = 0;
  for (int first = 0; first + per[static_cast<std::size_t>(vs)] <= layer; ++vs) first += per[static_cast<std::size_t>(vs)];
  return vs % c.stages;
}

PipeInputs pipeline_inputs(const PipelineConfig& c) {
  check_pipeline(c);
  PipeInputs in;
  // Multiples of 1/64 of about 1.1/sqrt(D) at most (std 0.6/sqrt(D)): tanh stays unsaturated and the
  // gradients neither vanish nor explode over the few dozen layers allowed.
  const int w = std::max(1, static_cast<int>(std::lround(70 / std::sqrt(double(c.width)))));
  for (int l = 0; l < c.layers; ++l)
    in.weights.push_back(random_integers(Shape{c.width, c.width}, c.seed + 1 + l, -w, w) / 64.0);
  const auto rows = micro_batch_rows(c);  // the real rows (the program pads them under --uneven pad)
  for (int k = 0; k < c.chunks; ++k) {
    const Shape shape{rows[static_cast<std::size_t>(k)], c.width};
    in.x.push_back(random_integers(shape, c.seed + 1000 + 2 * k, -64, 64) / 64.0);
    in.r.push_back(random_integers(shape, c.seed + 1001 + 2 * k, -64, 64) / 64.0);
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
  // Where each (virtual) stage's layers start and end: the messages round there.
  std::vector<bool> first_of(c.layers + 1, false), last_of(c.layers, false);
  for (int vs = 0, at = 0; vs < c.stages * c.virtual_stages; ++vs) {
    const int n = stage_layers(c)[static_cast<std::size_t>(vs)];
    if (n > 0) {
      first_of[at] = true;
      last_of[at + n - 1] = true;
    }
    at += n;
  }
  std::vector<Tensor> ins = {x}, outs;  // each layer's input (as the layer reads it) and output
  for (int l = 0; l < c.layers; ++l) {
    outs.push_back(xt::tanh(Tensor(matmul(ins.back(), in.weights[l]))));
    ins.push_back(last_of[l] ? rounded(outs.back(), wire) : outs.back());
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
    if (first_of[l]) dz = rounded(dz, wire);
    dz_size = matmul(dpre_size, transposed(xt::abs(in.weights[l])));
  }
  return ref;
}

SpmdProgram pipeline_program(const PipelineConfig& c, const PipeInputs& in) {
  return [c, &in](Device& dev) -> Outputs {
    if (dev.id() >= c.stages) return {};  // a mesh larger than the pipeline: the rest stay idle
    // Virtual stage vs = part * P + s holds layers vs * per ... vs * per + per - 1; its neighbours
    // vs - 1 and vs + 1 are on devices s - 1 and s + 1 (mod P). With v = 1: stage s, layers s * per ...
    // Uneven: virtual stage vs holds stage_layers(c)[vs] layers from first_layer(c, vs);
    // micro-batch k moves as micro_batch_stored(c, k) rows, zero rows after its real ones under pad.
    const int s = dev.id(), p = c.stages, v = c.virtual_stages, last = p * v - 1;
    const std::vector<int> layers_of = stage_layers(c);
    auto block = [&c](int k) { return Shape{micro_batch_stored(c, k), c.width}; };
    auto padded = [&](const Tensor& t, int k) {  // a micro-batch's real rows, zero rows after them
      if (t.shape()[0] == block(k)[0]) return t;
      Tensor out = xt::zeros<double>(block(k));
      std::copy(t.data(), t.data() + t.size(), out.data());
      return out;
    };
    std::map<int, Tensor> grads;  // layer -> its gradient, summed over the micro-batches
    for (int part = 0; part < v; ++part)
      for (int l = 0; l < layers_of[static_cast<std::size_t>(part * p + s)]; ++l)
        grads[first_layer(c, part * p + s) + l] = xt::zeros<double>(Shape{c.width, c.width});
    // (model chunk, micro-batch) -> the input of each layer, then the output
    std::map<std::pair<int, int>, std::vector<Tensor>> stash;
    std::size_t peak = 0;
    const auto order = stage_order(c.schedule, p, c.chunks, s, v);
    Tensor ran = xt::zeros<double>(Shape{order.size(), 3}), wall = xt::zeros<double>(Shape{order.size(), 2});
    for (std::size_t i = 0; i < order.size(); ++i) {
      const PipeOp op = order[i];
      const int vs = op.part * p + s, first = first_layer(c, vs), per = layers_of[static_cast<std::size_t>(vs)];
      const int prev = (s + p - 1) % p, next = (s + 1) % p;
      const std::string label = std::string(op.backward ? "B" : "F") + std::to_string(vs) + "," + std::to_string(op.chunk);
      // Messages into virtual stage vs carry its number: "act_c2_v5" is micro-batch 2's activation
      // for virtual stage 5 (with v = 1, "act_c2_v1" on stage 1).
      const std::string tag_in = "_c" + std::to_string(op.chunk) + "_v" + std::to_string(vs);
      // The op's input arrives first; its time (and its span) start once the input is here, so
      // waiting for a neighbour counts as idle, not as work.
      Tensor input;
      if (!op.backward) input = vs == 0 ? padded(in.x[op.chunk], op.chunk) : recv(dev, prev, block(op.chunk), "act" + tag_in);
      else input = vs == last ? padded(in.r[op.chunk], op.chunk) : recv(dev, next, block(op.chunk), "grad" + tag_in);
      TraceSpan span(label, [&] {
        return std::string(op.backward ? "backward" : "forward") + " of micro-batch " + std::to_string(op.chunk) +
               " on stage " + std::to_string(vs) + (v > 1 ? " (device " + std::to_string(s) + ")" : std::string());
      });
      wall(i, 0) = trace_now_us();
      const std::pair<int, int> key{op.part, op.chunk};
      if (!op.backward) {
        std::vector<Tensor> acts = {input};
        for (int l = 0; l < per; ++l) acts.push_back(unary_op("tanh", matmul(acts.back(), in.weights[first + l])));
        if (vs < last)
          send(dev, acts.back(), next, "act_c" + std::to_string(op.chunk) + "_v" + std::to_string(vs + 1));
        stash[key] = std::move(acts);
        peak = std::max(peak, stash.size());
      } else {
        const auto it = stash.find(key);
        if (it == stash.end())
          throw Error(ErrorKind::unsupported, "stage " + std::to_string(s) + " runs " + label + " before its forward");
        // --inject swap-microbatches: another micro-batch's stashed activations, one of the same rows
        // (uneven micro-batches of other sizes would end in a mismatch, not in a wrong gradient).
        auto from = it;
        for (auto o = stash.begin(); o != stash.end(); ++o)
          if (o != it && from == it && o->second.front().shape() == it->second.front().shape() &&
              dev.strike(FaultKind::swap_microbatches))
            from = o;
        const std::vector<Tensor>& acts = from->second;
        Tensor dz = input;
        for (int l = per - 1; l >= 0; --l) {
          const Tensor& out = acts[l + 1];
          const Tensor dpre = dz * (1.0 - out * out);
          grads[first + l] += matmul(transposed(acts[l]), dpre);  // accumulated over the micro-batches
          dz = matmul(dpre, transposed(in.weights[first + l]));
        }
        if (vs > 0) send(dev, dz, prev, "grad_c" + std::to_string(op.chunk) + "_v" + std::to_string(vs - 1));
        stash.erase(it);
      }
      wall(i, 1) = trace_now_us();
      ran(i, 0) = op.backward ? 1 : 0;
      ran(i, 1) = op.chunk;
      ran(i, 2) = op.part;
    }
    Outputs out = {{"order", ran}, {"wall", wall}, {"peak_stash", Tensor{double(peak)}}};
    for (const auto& [l, g] : grads) out["dW" + std::to_string(l)] = g;
    return out;
  };
}

}  // namespace shardlab
