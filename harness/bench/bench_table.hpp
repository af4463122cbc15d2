// The collectives benchmark's header lines (harness/bench/bench_table.cpp); bench_table and
// bench_csv are in bench.hpp.
#pragma once
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "harness/bench/bench.hpp"

namespace shardlab {

// What the "# ..." lines say about a run.
struct BenchFacts {
  std::string backend, mesh, axes;  // axes as axes_text prints them
  int group = 1, here = 1, cores = 1;  // devices in the group, on this host, and its cores
  int iters = 0, warmup = 0;
  bool native = false, fastest = false, crowded = false;
  DType dtype = DType::float32;
};
// The setup, BLAS, MPI and how to read each column, before the run.
std::vector<std::string> bench_header(const BenchFacts& f);
// The sync and (with native) order lines, from the run's rows.
void add_run_lines(BenchResult& result);

}  // namespace shardlab
