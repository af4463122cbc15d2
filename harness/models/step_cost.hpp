// The modeled time of one FFN step on a hardware preset (harness/cost/cost.hpp): each collective of the
// plan timed on the preset's topology (harness/cost/topology.hpp), and each contraction's FLOPs per device
// at the preset's compute rate. Data is counted in the preset's element size (float32 for the
// accelerators, float64 for this machine). Communication and compute are not overlapped and
// elementwise work (gelu) is not counted, so the share is an upper bound on what overlap leaves.
#pragma once
#include <string>
#include <vector>

#include "harness/models/ffn.hpp"

namespace shardlab {

struct Hardware;  // harness/cost/cost.hpp

struct CollectiveCost {
  FfnPhase phase = FfnPhase::forward;
  std::string op, tensor, axes;
  int group = 1;        // devices in the group
  double n_bytes = 0;   // the whole tensor of collective_seconds, in the preset's element size
  double sent_bytes = 0;  // what one device sends of it (collectives/predict.hpp), same element size
  double seconds = 0;
};

struct StepCost {
  std::vector<CollectiveCost> collectives;
  double comm_seconds = 0, compute_seconds = 0;
  double share() const;  // comm / (comm + compute), 0 for an empty step
};

// The plan's forward stages, and its backward ones too when `backward`.
StepCost ffn_step_cost(const FfnPlan& plan, bool backward, const Hardware& hw);
// Plans a training step (forward + backward) of `strategy` on `mesh` at `dims` (parse_ffn_dims).
StepCost ffn_step_cost(const std::string& strategy, const std::string& mesh, const std::string& dims, bool backward,
                       const Hardware& hw);

// A table of the collectives' modeled times and a summary line of comm, compute and share.
std::string step_cost_text(const StepCost& cost, const Hardware& hw);

}  // namespace shardlab
