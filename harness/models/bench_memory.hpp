// `shardlab bench memory`: what keeping freed memory (core/memory.hpp) is worth. One FFN training
// step (forward + backward) per strategy on the sim backend, timed with glibc's thresholds fixed at
// their documented 128 KiB defaults (freed blocks go back to the kernel; the next tensor faults its
// pages in) against memory kept, the two modes taking turns in one process.
#pragma once
#include <string>
#include <vector>

namespace shardlab {

struct MemoryBenchOptions {
  std::string dims = "B=64,S=8,M=256,H=1024";  // the bytes sweep's model
  std::string strategies = "gspmd,pairwise,data";
  int iters = 5;
  bool json = false;
};

struct MemoryBenchRow {
  std::string strategy, mesh;
  double released_seconds = 0, kept_seconds = 0;  // median per step
  bool pass = true;                               // every step equal to the unsharded layer
};

// Error(parse) for a bad strategy, dims or iters. Leaves memory kept, as a Runtime does.
std::vector<MemoryBenchRow> run_memory_bench(const MemoryBenchOptions& options);
// The command: table (or --json) and one verdict line; 1 when a step did not verify.
int bench_memory(const MemoryBenchOptions& options);

}  // namespace shardlab
