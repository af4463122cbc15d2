// One pipeline run, checked: what lesson 16 and `shardlab pipeline` print. The run happens on the
// session's devices (sim threads or MPI processes, one per stage); the checks are the gradients
// against the whole batch on one device, the bubble on the logical clock against (P-1)/(m+P-1) ((P-1)/(v m+P-1) interleaved),
// each stage's stashed micro-batches against its schedule's bound, and the bytes each stage sent
// against the activations and gradients it must pass on.
#pragma once
#include <string>
#include <vector>

#include "harness/check/session.hpp"
#include "harness/models/pipeline.hpp"

namespace shardlab {

struct PipelineRun {
  PipelineConfig config;
  std::vector<std::vector<PipeOp>> orders;  // as each device ran them
  std::vector<TimedOp> ticks;               // the logical clock (F and B one tick each)
  double bubble_measured = 0, bubble_predicted = 0;
  double wall_bubble = 0;                   // the same from the devices' wall-clock times
  std::vector<int> peak_stash, stash_bound;  // per stage
  std::vector<double> peak_activation_bytes;  // per stage: stashed micro-batches x (layers + 1) blocks
  std::vector<double> sent_bytes, sent_formula;  // per stage
  std::vector<int> sent_messages;                // per stage: sends in the ledger
  std::size_t block_bytes = 0;              // one micro-batch's activation in the wire type
};

// Runs and checks (the verdicts go into the session's report). Root only has the results.
PipelineRun run_pipeline(Session& session, const PipelineConfig& config);
// The tables a person reads: the timeline (within 100 columns), bubble, stashes, bytes.
std::string pipeline_text(const PipelineRun& r);

}  // namespace shardlab
