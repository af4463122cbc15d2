// --explain for programs: for each tensor a collective moves, why it lies as it does
// (its spec's origin: annotated, like an annotated tensor of the same dims, derived by
// propagation's rules, or chosen by the layout search), which collectives move it and for which
// op, and what the alternatives cost: the whole program's bytes per device with that one tensor
// laid out otherwise (and the renames that lie as it does), everything else as planned, each
// alternative planned anew by plan_tensor_program. A layout no plan can reach (a softmax's dim
// split) is left out.
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "harness/plan/program_plan.hpp"

namespace shardlab {

// The program's bytes per device with `tensor` laid out as each of its layouts (the planned one
// first), cheapest first after it; at most `limit` (0: all).
std::vector<std::pair<Spec, std::size_t>> layout_alternatives(const ProgramPlan& plan, const std::string& tensor,
                                                              std::size_t limit = 0);

// One block per moved tensor, in the order the run first moves it, wrapped to 100 columns.
std::string program_explain_text(const ProgramPlan& plan);

}  // namespace shardlab
