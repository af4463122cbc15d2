// The planner's search: the cheapest way to run one contraction, instead of the articles' fixed
// rules (planner.hpp's plan_contraction, kept as `--plan article`).
//
// A layout is a spec. From the operands' given specs a device may, one step at a time:
//   - AllGather a suffix of a dim's mesh axes (a dim on (X,Y) gathers Y, or X and Y);
//   - slice a dim by a mesh axis it does not use yet, locally and for free (appended innermost);
//   - AllToAll the innermost axis of one dim onto the end of another dim's list;
// then contract once every dim the operands share is split the same way in both and no mesh axis
// splits a free dim of each (the product is then partial over the contracted dims' axes); then,
// on the result: AllReduce any set of its partial axes, ReduceScatter a run of them onto a dim,
// or the three moves above, until it has the output spec (partial sums the output asks for are
// kept). Each step costs the bytes one device sends (predicted_bytes_sent). Mesh axes of size 1
// are dropped from every spec first: they split nothing, so they produce no steps.
//
// The search is Dijkstra over each operand's layouts (the two move independently before the
// contraction), then over the result's layouts from every product it can form. Ties: fewer bytes,
// then fewer collectives, then fewer FLOPs per device, then the articles' plan.
#pragma once
#include <optional>
#include <vector>

#include "harness/plan/planner.hpp"

namespace shardlab {

struct SearchResult {
  Plan best;                        // the cheapest plan
  Plan article;                     // plan_contraction's to the same output, for comparison (empty if it refused)
  std::string article_refusal;      // why plan_contraction cannot reach the output, or empty
  std::vector<Plan> alternatives;   // the next cheapest plans through other products, best first (at most 4)
  std::size_t layouts_explored = 0; // states settled by the search
  // No output spec: where the articles' rules, left to choose, leave the result (rule 4's product
  // with its partial sums all-reduced). It differs from the natural output where rule 1 gathers a
  // batch dim that only one operand splits (DTensor keeps it split and slices the other).
  std::optional<Spec> article_output;
  // search_cheapest_output only: every complete layout of the result a plan reaches for no more
  // than the natural plan, with its fewest bytes per device, in the order they were ranked (the
  // first is the one `best` ends with); the search's plan to the natural output; and what moving
  // best's output back to the natural layout would send (what a next op expecting it pays).
  std::vector<std::pair<Spec, std::size_t>> outputs;
  Plan natural;
  std::size_t back_to_natural_bytes = 0;
};

// The cheapest plan that leaves the result in `out`. Without `out`, the result takes its natural
// layout (harness/plan/natural.hpp), the one propagation gives as GSPMD and DTensor give it: every
// free dim keeps the split its operand has, no dim is split that no operand splits, an outer dim
// of each operand on one mesh axis keeps A's split (article 001's rule 2: the batch stays split,
// the weight is gathered; options.gather_first_on_outer_conflict keeps B's), and partial sums are
// completed by AllReduce. `article` is plan_contraction's plan to the same output, so the two
// compare like with like. Throws as plan_contraction does for specs that do not fit, and
// Error(unsupported) if no plan reaches `out`. Partial-sum outputs the articles' rules refuse are
// searched for too (article_refusal says why they refused).
SearchResult search_contraction(const Einsum& eq, const Mesh& mesh, const Operand& a, const Operand& b,
                                const std::optional<Spec>& out = std::nullopt, const PlanOptions& options = {});

// `--out-spec auto`: the result takes the cheapest complete layout it can reach. Of those a plan
// reaches for no more than the natural plan costs, the one sent to for the fewest bytes (or least
// time), ties going to the layout that splits the most dims, then into the most blocks, then to
// fewer collectives, then to the natural output. `natural` and `back_to_natural_bytes` say what
// the natural layout costs and what a next op that wants it would pay to undo the choice.
SearchResult search_cheapest_output(const Einsum& eq, const Mesh& mesh, const Operand& a, const Operand& b,
                                    const PlanOptions& options = {});

// The fewest-bytes steps (or least modeled time, with options.time_on) that take tensor `t` from
// t.spec, which may hold partial sums, to `target`: AllGathers, free slices, AllToAlls, AllReduces
// and ReduceScatters, as PlanSteps on operand 2 labelled t.name. Axes of size 1 make no steps.
// Error(unsupported) when no sequence of such steps reaches it (e.g. partial sums asked to appear).
std::vector<PlanStep> search_reshard(const Mesh& mesh, const Operand& t, const Spec& target,
                                     const PlanOptions& options = {});

// The spec without mesh axes of size 1 (they split nothing).
Spec without_unit_axes(const Mesh& mesh, Spec s);

// A layout a tensor can reach and the fewest bytes per device that take it there.
struct Reached {
  Spec spec;  // without axes of size 1, no partial sums
  std::size_t bytes = 0;
};
// Every complete layout tensor t can be moved to from t.spec (which may hold partial sums), by
// the moves search_reshard uses, each with its fewest bytes per device, cheapest first.
std::vector<Reached> reshard_costs(const Mesh& mesh, const Operand& t, const PlanOptions& options = {});
// Every complete layout the result of a contraction can be left in, each with the bytes per
// device of the cheapest plan that leaves it so (what search_contraction sends to that output
// spec), cheapest first. The operands' specs must be valid for their shapes.
std::vector<Reached> contraction_costs(const Einsum& eq, const Mesh& mesh, const Operand& a, const Operand& b,
                                       const PlanOptions& options = {});

// What the search minimises for a plan: its bytes per device, or with hardware its modeled seconds
// (every collective by the alpha-beta model of harness/cost/cost.hpp plus the contraction's compute).
double plan_objective(const Plan& plan, const Hardware* hw);

}  // namespace shardlab
