// Pipeline parallelism (article 004): L layers h = tanh(h W_l), all [D, D], cut into P stages of
// L/P consecutive layers, stage s on device s. The batch is cut into `chunks` micro-batches that
// flow through the stages: forward F_{s,c} receives micro-batch c's activation from stage s-1 and
// sends its own to s+1; backward B_{s,c} receives the gradient from s+1 and sends one to s-1.
// Every weight gradient is summed over the micro-batches (gradient accumulation), so it equals
// the whole batch's. Loss L = sum over the batch of y * R.
//   naive  one micro-batch: the article's vertical split, one device busy at a time
//   gpipe  every forward, then every backward (last micro-batch first, as GPipe's figure)
//   1f1b   stage s runs P-s-1 forwards, then alternates one forward and one backward, then the
//          remaining backwards: at most P-s micro-batches' activations stashed at once
//   interleaved  Megatron-LM's interleaved 1F1B: the model is cut into V = v P virtual stages of
//          L/V layers; device s holds virtual stages s, s+P, s+2P, ... (v model chunks), so a
//          micro-batch passes every device v times. Forwards go in groups of P micro-batches, model
//          chunk by model chunk; a device runs 2(P-s-1) + (v-1)P forwards first (all of them when
//          m = P), then alternates one forward and one backward, then drains. The fill and drain
//          take P-1 ops of L/V layers instead of L/P: the bubble is (P-1)/(v m + P-1) of the time,
//          (P-1)/(v m) of the ideal time, for v times the point-to-point messages. Needs m a
//          multiple of P, v >= 2 and P >= 2.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/runtime.hpp"
#include "core/dtype.hpp"
#include "core/mesh.hpp"
#include "harness/models/pipeline_clock.hpp"

namespace shardlab {

enum class PipeSchedule { naive, gpipe, one_f_one_b, interleaved };
// naive | gpipe | 1f1b | interleaved; else Error(parse)
PipeSchedule parse_schedule(const std::string& text);
std::string schedule_name(PipeSchedule s);

struct PipelineConfig {
  int stages = 4, chunks = 4, layers = 8;
  int virtual_stages = 1;  // model chunks per device (v); above 1 for the interleaved schedule only
  PipeSchedule schedule = PipeSchedule::gpipe;
  std::size_t width = 8, micro_batch = 2;
  std::uint64_t seed = 0;
  // Issue 32. batch: rows of the whole batch, cut into `chunks` micro-batches (0: chunks x
  // micro_batch). uneven: layers or a batch that do not divide. none refuses; chunk gives the first
  // stages (micro-batches) ceil(n/P) layers (rows) and the last fewer, as torch.chunk; pad gives
  // every micro-batch ceil(B/m) rows, zero rows after the real ones (zero loss weights, so zero
  // gradient), and cuts layers as chunk (a padded layer would change the result). Uneven layers
  // need one model chunk per device (not interleaved).
  std::size_t batch = 0;
  Uneven uneven = Uneven::none;
};
// Layers of each virtual stage (P v of them): L/(P v) each, or torch.chunk's cut of L over P.
std::vector<int> stage_layers(const PipelineConfig& c);
int first_layer(const PipelineConfig& c, int virtual_stage);
// Real rows of each micro-batch, and the rows each is stored and sent as (ceil(B/m) under pad).
std::vector<std::size_t> micro_batch_rows(const PipelineConfig& c);
std::size_t micro_batch_stored(const PipelineConfig& c, int chunk);
// Error(parse) for stages or chunks below 1, naive with chunks other than 1, virtual stages other
// than 1 outside interleaved (interleaved: v >= 2, P >= 2, m a multiple of P), and layers that do
// not split evenly over the stages times v (Error(not_divisible)).
void check_pipeline(const PipelineConfig& c);

// The order in which device `stage` runs its forwards and backwards (v model chunks each).
std::vector<PipeOp> stage_order(PipeSchedule s, int stages, int chunks, int stage, int virtual_stages = 1);
// Every device's order, device 0 first.
std::vector<std::vector<PipeOp>> stage_orders(PipeSchedule s, int stages, int chunks, int virtual_stages = 1);

struct PipeInputs {
  std::vector<Tensor> weights;  // L of [D, D]
  std::vector<Tensor> x, r;     // per micro-batch: input and loss weights, [b, D]
};
PipeInputs pipeline_inputs(const PipelineConfig& c);

// The whole batch through all layers on one device, rounding to the element type `wire` the
// activations and gradients the stages send each other, where they send them: each weight's
// gradient, and a tolerance per element for the order of float64 sums, 16 (L + 2) u64 times the
// sum of the sizes of the terms each gradient element adds. What the wire rounds is thus in the
// reference, not in the tolerance (which was 16 (L + 2) u_wire: up to 180 times the gradients in
// bfloat16). The one risk: a value within float64 rounding of a midpoint between two wire
// numbers rounding apart in the two runs (about 2^-44 per element sent).
struct PipeReference {
  std::vector<Tensor> grads, tolerance;
};
PipeReference pipeline_reference(const PipelineConfig& c, const PipeInputs& in, DType wire);

// Device s runs stage s, or virtual stages s, s+P, ... (devices beyond the stages do nothing).
// Returns "dW<l>" for each of its layers, "order" [ops, 3] (backward 0/1, micro-batch, model
// chunk) as it ran them, "wall" [ops, 2] (start and end, microseconds on the monotonic
// clock) and "peak_stash" [1]: the most micro-batches whose activations it held at once.
SpmdProgram pipeline_program(const PipelineConfig& c, const PipeInputs& in);

// The device that holds layer l.
int device_of_layer(const PipelineConfig& c, int layer);

// The most micro-batches (interleaved: micro-batch and model chunk pairs) a stage holds
// activations for: gpipe m, 1f1b min(P - s, m), naive 1, interleaved min(2(P-s-1) + (v-1)P + 1, v m)
// (v m when m = P).
int stash_formula(PipeSchedule s, int stages, int chunks, int stage, int virtual_stages = 1);
// Point-to-point messages a device sends in one step: each micro-batch's activation out of each of
// its virtual stages but the last of the model, and its gradient out of each but the first.
int messages_formula(const PipelineConfig& c, int stage);

}  // namespace shardlab
