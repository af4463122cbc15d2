// The modeled time of a planned program (harness/plan/program_plan.hpp) on a hardware preset
// (harness/cost/cost.hpp), summed by the ops' parts (a case file's part = "attention"; backward
// ops take their forward op's): each collective timed on the preset's topology
// (harness/cost/topology.hpp), each einsum's FLOPs per device at the preset's matmul rate. As for
// the FFN (harness/models/step_cost.hpp), data is counted in the preset's element size,
// elementwise work is not counted and nothing overlaps, so a share is an upper bound.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "harness/plan/program_plan.hpp"

namespace shardlab {

struct Hardware;  // harness/cost/cost.hpp

struct PartCost {
  std::string part;
  std::size_t collectives = 0;
  double comm_seconds = 0, compute_seconds = 0;
  double share() const;  // comm / (comm + compute), 0 when both are 0
};

// One entry per part in the order its first op comes (ops without a part: "other"), then
// "layer": the whole program.
std::vector<PartCost> program_cost(const ProgramPlan& plan, const Hardware& hw);

// A table of the parts: collectives, modeled communication and compute, and the share; with
// `measured` (part -> share) a column of a source's measured shares beside the modeled ones.
std::string program_cost_text(const std::vector<PartCost>& parts, const Hardware& hw,
                              const std::map<std::string, double>& measured = {});

}  // namespace shardlab
