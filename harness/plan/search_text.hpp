// The plan search in words, for --explain and JSON: which of the articles' and the book's cases
// a pair of layouts is, the chosen plan beside the articles' and the rejected ones, and with
// --out-spec auto the output layouts ranked beside the natural one.
#pragma once
#include <string>

#include "harness/plan/plan_search.hpp"

namespace shardlab {

// Which of the sharding cases a pair of operand layouts is, in the articles' names (article 001:
// Case 1A inner dims split over the same mesh axes, 1B over different ones, Case 2 outer dims
// split, both at once "full sharding") and the JAX scaling book's (case 1: no contracting dim
// split; 2: one operand's; 3: both the same way; 4: a mesh axis splitting a free dim of each).
// E.g. "Case 1B + Case 2 (full sharding); book case 4". Axes of size 1 split nothing.
std::string cases_text(const Einsum& eq, const Mesh& mesh, const Spec& a, const Spec& b);

// "8.00x" (a / b), or "all of" when b is 0 and a is not.
std::string times_text(double a, double b);
// For --explain: the chosen plan, the articles' and the best rejected ones, one block each with
// its bytes per device, collectives and steps.
std::string explain_text(const SearchResult& r);
// For search_cheapest_output's result: which output layout was chosen and why, what the natural
// one costs and what going back to it costs, and what each other layout ranked costs; empty for
// any other result.
std::string outputs_text(const SearchResult& r);
// --explain: the natural plan (`natural`, from search_contraction with no output spec) and the
// cheapest output's (`cheapest`, from search_cheapest_output), one table row each.
std::string natural_vs_auto_text(const SearchResult& natural, const SearchResult& cheapest);
// The same as a JSON array: the chosen plan, the articles' (when they reach the output) and the
// rejected ones, each {"label", "bytes_per_device", "collectives", "plan"}.
std::string alternatives_json(const SearchResult& r);

}  // namespace shardlab
