// `shardlab bench plan`: how long the planner's search (harness/plan/plan_search.hpp) takes on random
// contractions over 4-axis meshes, the "instant" target being a median under 15 ms and no search
// over 50 ms. Each search is timed by the wall clock and by the thread's CPU time; the targets are
// judged on CPU time, which other jobs sharing the machine's cores do not inflate. Cases are
// random specs (each mesh axis on a random dim or none) for five einsums, dims of 256, half of them
// with a random output spec; cases the planner refuses (an invalid pair of specs) are counted apart.
#pragma once
#include <string>
#include <vector>

namespace shardlab {

struct PlanBenchOptions {
  std::string meshes = "W=2,X=2,Y=2,Z=2;W=4,X=4,Y=4,Z=4";  // separated by ';'
  int cases = 200;                                         // per mesh
  unsigned seed = 1;
  bool json = false;
};

struct PlanBenchRow {
  std::string mesh;
  int searched = 0, refused = 0;
  double median_ms = 0, p95_ms = 0, max_ms = 0;              // by the wall clock
  double cpu_median_ms = 0, cpu_p95_ms = 0, cpu_max_ms = 0;  // by the searching thread's CPU time
  std::size_t median_layouts = 0, max_layouts = 0;
  std::string slowest;  // the slowest case, as shardlab matmul/einsum arguments
};

// Error(parse) for a bad mesh or a count below 1.
std::vector<PlanBenchRow> run_plan_bench(const PlanBenchOptions& options);
// The command: a table (or --json) and one verdict line against the targets (a median under 15 ms
// and a slowest search under 50 ms, in CPU time); exit 0 either way.
int bench_plan(const PlanBenchOptions& options);

}  // namespace shardlab
