// shardlab bench ffn: one FFN run timed phase by phase (inputs, sharded run, verification) in one
// process, beside this machine's single-core GEMM rate for the same element type measured in the
// same run, so the sharded run can be set against its floor:
//   floor = FLOPs per device x devices / (single-core rate x cores)
// (every device's matmuls, spread perfectly over the cores, at the best one-core speed).
#pragma once
#include <string>

namespace shardlab {

struct FfnBenchOptions {
  std::string dims = "article";
  std::string strategy = "gspmd";
  std::string mesh;  // default: the strategy's (shardlab ffn's)
  std::string dtype = "float32";
  std::string verify = "auto";
  bool backward = false;
  int steps = 0;  // --steps N: N warm steps after the first, each timed (a training loop's steps)
  bool json = false;
  std::string trace;  // also write the run's timeline here (harness/check/trace.hpp)
};

// GFLOP/s of one core on a square product of element type `dtype` ("float32", ...): the best of a
// few sgemm/dgemm calls of n x n x n with one BLAS thread (bfloat16 computes as float32).
double single_core_gemm_gflops(const std::string& dtype, std::size_t n = 1536);

struct FfnPlan;
// The floor above, in seconds, for `plan` at `one_core_gflops` on this machine's cores.
double ffn_floor_seconds(const FfnPlan& plan, double one_core_gflops);

int bench_ffn(const FfnBenchOptions& o);

}  // namespace shardlab
