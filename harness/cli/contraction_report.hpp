// What `shardlab matmul` and `shardlab einsum` print and report about the plan before it runs:
// the blocks of dims that do not divide their axes, the searched plan against the articles' one and
// the output layout it reached, and the plan's fields of the JSON report.
#pragma once
#include <optional>
#include <ostream>
#include <string>

#include "core/einsum.hpp"
#include "harness/check/report.hpp"
#include "harness/plan/plan_search.hpp"
#include "harness/plan/planner.hpp"

namespace shardlab {

// What is contracted and how it is planned, as the flags give it.
struct Contraction {
  Einsum eq;
  Operand a, b;
  std::optional<Spec> out_spec;  // none: the natural layout (or the cheapest, with auto_out)
  bool auto_out = false;         // --out-spec auto
  std::string result;            // the result's label
  PlanOptions options;           // options.time_on: the hardware of --objective time, else null
};

// Dims that do not divide their axes: each block's real rows, as the --uneven rule cut them.
void print_uneven(std::ostream& out, Report& rep, const Mesh& mesh, const Contraction& c, const Plan& plan);

// The searched plan against the articles' one, its output layout, and with `explain` the rest
// (the articles' plan, the best rejected ones, the natural output against the cheapest).
void print_search(std::ostream& out, Report& rep, const Mesh& mesh, const Contraction& c,
                  const SearchResult& found, const Plan& plan, bool explain);

// The plan in the report; with plan_only its collectives as planned, since none ran.
void report_plan(Report& rep, const Mesh& mesh, const Contraction& c, const Plan& plan, bool plan_only);

}  // namespace shardlab
