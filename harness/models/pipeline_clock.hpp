// The timing of a pipeline's schedule (harness/models/pipeline.hpp): the logical clock that
// starts each op when its device is free and its input exists, the bubble it leaves against the
// formula, and the timeline picture of who ran what when. Apart from the model: it reads only the
// order each device ran its ops in.
#pragma once
#include <string>
#include <vector>

#include "collectives/runtime.hpp"

namespace shardlab {

// One op of a schedule: a forward or a backward of one micro-batch through one model chunk.
struct PipeOp {
  bool backward = false;
  int chunk = 0;  // the micro-batch
  int part = 0;   // which of the device's model chunks: virtual stage part * P + device (0 but interleaved)
};

// The order each stage ran its ops in, read back from the run's "order" outputs.
std::vector<std::vector<PipeOp>> executed_orders(const RunResult& run, int stages);

// The logical clock: every op takes f_cost or b_cost ticks and starts when its device is free and
// its input exists (a forward after the previous virtual stage's forward of that micro-batch; a
// backward after its own forward and the next virtual stage's backward of it). Virtual stage
// part * P + s runs on device s, P = orders.size(); with v = 1 these are the plain stages. Computed
// from the order each device actually ran; Error(mismatch) if that order cannot finish.
struct TimedOp {
  int stage = 0;
  PipeOp op;
  double start = 0, end = 0;
};
std::vector<TimedOp> logical_clock(const std::vector<std::vector<PipeOp>>& orders, double f_cost = 1,
                                   double b_cost = 1);
// Idle share of stages x makespan; and the formula (P-1)/(v m+P-1) (v = 1: (P-1)/(m+P-1)).
double bubble_fraction(const std::vector<TimedOp>& ops, int stages);
double bubble_formula(int stages, int chunks, int virtual_stages = 1);
// One row per device, one 5-column cell per tick (one more than the longest label when that is 5):
// "F0,2" or "B3,1" (virtual stage, micro-batch), "  .  " when idle. Always within `columns` (at
// least 40): one line while it fits (18 ticks in 100 columns), else up to 4 bands of even length,
// each under its ticks' range, else one character per k ticks in bands: 'F' forwards only, 'B'
// backwards only, 'X' both, '.' idle, lower case when partly idle.
std::string timeline_picture(const std::vector<TimedOp>& ops, int stages, int columns = 100);

}  // namespace shardlab
