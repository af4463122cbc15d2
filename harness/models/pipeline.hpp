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
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/runtime.hpp"
#include "core/dtype.hpp"

namespace shardlab {

enum class PipeSchedule { naive, gpipe, one_f_one_b };
PipeSchedule parse_schedule(const std::string& text);  // naive | gpipe | 1f1b; else Error(parse)
std::string schedule_name(PipeSchedule s);

struct PipelineConfig {
  int stages = 4, chunks = 4, layers = 8;
  PipeSchedule schedule = PipeSchedule::gpipe;
  std::size_t width = 8, micro_batch = 2;
  std::uint64_t seed = 0;
};
// Error(parse) for stages or chunks below 1, naive with chunks other than 1, and layers that do not
// split evenly over the stages (Error(not_divisible)).
void check_pipeline(const PipelineConfig& c);

struct PipeOp {
  bool backward = false;
  int chunk = 0;
};
// The order in which stage `stage` runs its forwards and backwards.
std::vector<PipeOp> stage_order(PipeSchedule s, int stages, int chunks, int stage);

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

// Device s runs stage s (devices beyond the stages do nothing). Returns "dW<l>" for each of its layers, "order" [ops, 2] (backward 0/1,
// micro-batch) as it ran them, "wall" [ops, 2] (start and end, microseconds on the monotonic
// clock) and "peak_stash" [1]: the most micro-batches whose activations it held at once.
Program pipeline_program(const PipelineConfig& c, const PipeInputs& in);

// The order each stage ran its ops in, read back from the run's "order" outputs.
std::vector<std::vector<PipeOp>> executed_orders(const RunResult& run, int stages);

// The logical clock: every op takes f_cost or b_cost ticks and starts when its device is free and
// its input exists (a forward after the previous stage's forward of that micro-batch; a backward
// after the next stage's backward of it, or on the last stage after its own forward). Computed
// from the order each device actually ran; Error(mismatch) if that order cannot finish.
struct TimedOp {
  int stage = 0;
  PipeOp op;
  double start = 0, end = 0;
};
std::vector<TimedOp> logical_clock(const std::vector<std::vector<PipeOp>>& orders, double f_cost = 1,
                                   double b_cost = 1);
// Idle share of stages x makespan; and the formula (P-1)/(m+P-1).
double bubble_fraction(const std::vector<TimedOp>& ops, int stages);
double bubble_formula(int stages, int chunks);
// One row per device, one 5-column cell per tick: "F0,2" or "B3,1", "  .  " when idle.
std::string timeline_picture(const std::vector<TimedOp>& ops, int stages);
// The most micro-batches a stage holds activations for under each schedule: gpipe m, 1f1b
// min(P - s, m), naive 1.
int stash_formula(PipeSchedule s, int stages, int chunks, int stage);

}  // namespace shardlab
