// Plan assembly for the search (plan_search.cpp): the moves a search found, turned into a plan's
// steps, each with its bytes and a reason a person reads.
#pragma once
#include <string>
#include <vector>

#include "harness/plan/plan_search_layouts.hpp"
#include "harness/plan/planner.hpp"

namespace shardlab::search_detail {

// A candidate: operand layouts to multiply, the product, and its total cost.
struct Candidate {
  Code a_used, b_used;
  Code product;
  Cost cost;
  double flops = 0;
};

// The plan step of move m on tensor `label` (operand o, dims named by `letters`), which stands at
// `cur`; cur becomes m.after.
PlanStep step_of(const Subject& t, const Mesh& mesh, const Move& m, Spec& cur, int o, const std::string& label,
                 const std::string& letters);

// What every plan of one search shares: the articles' plan (inputs, names, shapes and output as
// it has them), the three tensors' subjects, the operands' searches from their given layouts.
struct SearchSides {
  const Plan& base;
  const Subject* subject;  // A, B, the result
  const Layouts* ops;      // A's and B's
  std::string label[3], letters[3];
};

// The plan through candidate c: A's and B's moves to c's operand layouts, the local product,
// then `result_moves` on the result.
Plan assemble_plan(const SearchSides& sides, const Candidate& c, const std::vector<Move>& result_moves);

}  // namespace shardlab::search_detail
