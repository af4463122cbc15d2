// The program's layout search: propagation's rules 3-5 (harness/plan/propagate.hpp) give
// each op output that neither an annotation nor an annotated tensor of the same dims decides a
// spec by following its operands, the articles' natural output (the program's inputs are where
// the data is: an unannotated one keeps the spec the rules derive for it). Another layout of such a free tensor
// may make the program send fewer bytes: an einsum's result left split where its product lies
// instead of gathered (`bmk,bkn->bmn` with only A split over b), or left as the cheap operand's
// gather leaves it. This search tries every layout of every free tensor (each mesh axis of size 2
// or more on at most one dim, in any order, only where it divides the dim; a softmax's dim
// whole), prices every op as the program planner plans it alone (harness/plan/plan_search.hpp:
// the contraction search and the reshard search, without reusing copies or deferring partial
// sums, which only save more), and keeps the assignment whose ops send the fewest bytes per
// device. Ties keep propagation's specs. Branch and bound in program order: an op is priced once
// its last free tensor is chosen, and a partial assignment costing no less than the best is cut.
//
// Trying everything runs where it is cheap: when the product of the free tensors' layout counts
// is at most `budget`. Larger programs (a whole Transformer layer) get a local search instead: a
// greedy pass in program order, then single changes while one lowers the total; its answer is
// kept only where it sends fewer bytes than propagation's specs (it may miss the cheapest).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "core/mesh.hpp"
#include "harness/plan/program.hpp"
#include "harness/plan/propagate.hpp"

namespace shardlab {

struct LayoutSearch {
  bool searched = false;          // false: no free tensor, nothing changed
  bool exhaustive = false;        // every assignment tried (within the budget), else a local search
  double assignments = 1;         // the product of the free tensors' layout counts
  std::size_t free_tensors = 0;
  double rules_elements = 0;      // elements one device sends under propagation's specs (all ops)
  double best_elements = 0;       // ... under the chosen ones
  std::vector<std::string> changed;  // tensors whose spec the search changed, in program order
};

// Every complete layout a tensor of `shape` may take: each mesh axis of size 2 or more on at most
// one dim, in every order, each split dividing what is left of its dim; the dims whose positions
// are in `whole` stay whole. The replicated spec first.
std::vector<Spec> all_layouts(const Mesh& mesh, const Shape& shape, const std::vector<std::size_t>& whole = {});

// The spec of a tensor with dims `dims` that lies as `out` (dims out_dims) does on the dims it has.
Spec restricted(const Spec& out, const std::string& out_dims, const std::string& dims);
// The spec of a tensor with dims `dims` (out_dims' and more) that lies as `out` does on the dims
// out has, whole on the others (a split's input, its split dim whole).
Spec widened(const Spec& out, const std::string& out_dims, const std::string& dims);
// `s` without the dims in `over` (of `dims`); with `partial`, their axes become partial sums.
Spec reduced(const Spec& s, const std::string& dims, const std::string& over, bool partial);

constexpr double kLayoutSearchBudget = 2e6;

// `prop` with the free tensors' specs replaced by the cheapest assignment (origins say so).
Propagation search_layouts(const TensorProgram& p, const Mesh& mesh, Propagation prop, LayoutSearch* info = nullptr,
                           double budget = kLayoutSearchBudget);

}  // namespace shardlab
