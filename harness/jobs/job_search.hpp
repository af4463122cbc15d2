// The search over training layouts of a whole job (harness/jobs/plan_model.hpp prices each), and
// the text that explains its choice: article 004's "which strategy when" as statements that hold
// or fail with this job's numbers, why the runners-up lose, and what does not fit.
#pragma once
#include <string>
#include <vector>

#include "harness/jobs/plan_model.hpp"

namespace shardlab {

struct JobSearchOptions {
  int devices = 0;
  JobPlanOptions plan;
  int fix_tp = 0, fix_pp = 0, fix_cp = 0;  // 0: searched
  bool only_full_recompute = false;
  bool allow_zero = true, allow_sp = true;
};

struct JobSearchResult {
  std::vector<JobCost> fitting;  // fastest first
  std::vector<JobCost> too_big;  // fastest first
  long evaluated = 0;
};

// A layout with context parallelism that is faster than the fastest without it by less than this
// share of the step is a tie, and the one without CP goes first. The model does not charge CP for
// what grows at short sequences (GEMMs on blocks of fewer tokens, one more ring per layer), while
// its own step times are only within 10% of Table 1: GPT-3 175B at 2,048 tokens "won" CP 2 by 1%,
// which is not a finding. At long sequences CP wins by far more (llama3-70b-128k: 28%).
constexpr double kCpTie = 0.03;
// Moves the fastest layout with CP 1 to the front of `fastest_first` when the front has CP > 1 and
// is less than kCpTie faster; otherwise leaves the order alone.
void prefer_no_cp_on_a_tie(std::vector<JobCost>& fastest_first);

// Error(parse) when the device count is not a multiple of a node (or under one node, not a
// divisor of it), or no layout exists at all for these degrees.
JobSearchResult search_layouts(const ModelSpec& m, const ClusterSpec& c, const JobSearchOptions& o);

// The best `top` layouts with memory and time by part, the rules, the runners-up and the layouts
// that do not fit; every line within 100 columns.
std::string plan_text(const ModelSpec& m, const ClusterSpec& c, const JobSearchOptions& o, const JobSearchResult& r,
                      int top);

}  // namespace shardlab
