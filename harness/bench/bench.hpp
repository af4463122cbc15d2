// shardlab bench collectives: an nccl-tests style table for AllReduce, AllGather, ReduceScatter
// and AllToAll over one group of the mesh. Ours (the ring/pairwise algorithms over Transport) and
// MPICH's own (mpi backend only: MPI_Allreduce etc. called directly on a communicator of the group,
// preallocated buffers) run interleaved in one program, and which runs first alternates from one
// iteration to the next (ours then native, native then ours ...), so both see the same machine
// state. Every timed call starts after an untimed meeting of the group (timed apart: `sync`).
// Beside each call, on every device, std::memcpy copies the bytes one device sends in that
// collective between two preallocated, pre-touched buffers: the floor of an in-process transport.
// The result of every timed call is checked against values from a formula (#wrong counts the wrong
// elements of all of them).
//
// Sizes follow nccl-tests: `size` is the largest buffer of the call (the gathered output for
// AllGather, the full input for the others), `count` its doubles; algbw = size / time and
// busbw = algbw * 2(n-1)/n for AllReduce, (n-1)/n for the others.
#pragma once
#include "collectives/runtime.hpp"
#include <cstddef>
#include <string>
#include <vector>

namespace shardlab {

struct BenchOptions {
  std::string backend = "sim";
  std::string mesh;  // default: X=<ranks> under mpi, X=2 under sim
  std::string axes;  // default: every axis of the mesh (one group of all devices)
  std::string ops = "all_reduce,all_gather,reduce_scatter,all_to_all";
  std::string min = "1K", max = "16M";  // bytes, with K/M/G suffixes (powers of 1024)
  int factor = 4;
  int iters = -1, warmup = -1;  // -1: 20 and 5, or 2 and 1 with more devices than cores
  std::string csv;              // also write the rows here, with # header rows
  bool perturb_expected = false;  // testing: every expected value off by one; #wrong must show it
  std::string dtype = "float32";  // element type moved: float32, float64 or bfloat16
  std::string trace;              // also write the timeline here (harness/check/trace.hpp)
  std::string machine;            // a machine.dat: also the cost model's time per row (calibrate.hpp)
  // How each device's timed calls of one size become its time: "median" (robust on a shared
  // machine) or "min" (the fastest call: where ranks outnumber cores, contention only ever adds
  // time, so the fastest call is the best estimate of what the link or memory allows).
  std::string statistic = "median";
};

struct BenchRow {
  std::string op;
  std::size_t bytes = 0, count = 0;
  double ours_seconds = 0, native_seconds = -1;  // median per call, slowest device; -1: not run
  std::size_t ours_wrong = 0, native_wrong = 0;  // elements that differ from the formula, all timed calls
  double memcpy_seconds = -1;    // median std::memcpy of memcpy_bytes, slowest device; -1: not measured
  std::size_t memcpy_bytes = 0;  // bytes one device sends in this collective: size * bus_factor
  // Sim only: median std::memcpy of memcpy_bytes that another thread has just written, as a
  // transfer between two devices' threads finds them (in the other core's cache); -1: not measured.
  double peer_memcpy_seconds = -1;
  int ours_first = -1;           // timed iterations in which ours ran before native; -1: no native
};

struct BenchResult {
  std::vector<std::string> header;  // the "# ..." lines: setup, BLAS, MPI, how to read the table
  std::vector<BenchRow> rows;       // root only
  int group_size = 1;
  bool native = false;
  int iters = 0;              // timed calls per size and implementation
  double sync_seconds = -1;   // median untimed meeting before each timed call, slowest device
  std::string statistic = "median";  // of each device's timed calls: "median" or "min"
  std::vector<TraceRun> trace;  // with BenchOptions::trace (root only)
  std::size_t wrong() const;
};

std::size_t parse_bytes(const std::string& text, const std::string& what);  // "64K" -> 65536
std::vector<std::size_t> bench_sizes(const BenchOptions& o);  // --min, --min*factor ... <= --max; Error(parse)
struct BenchCollective;                                       // harness/bench/bench_collective.hpp
std::vector<const BenchCollective*> bench_ops(const std::string& names);  // --ops; Error(parse) for unknown
double bus_factor(const std::string& op, int n);                          // 2(n-1)/n or (n-1)/n
// Bytes one member of a group of n sends in `op` on `count` doubles (count divisible by n): what the
// memcpy column copies. 2(n-1) chunks of count/n for all_reduce, n-1 for the others.
std::size_t bytes_sent_per_device(const std::string& op, int n, std::size_t count, std::size_t element_bytes);
BenchResult run_collectives_bench(const BenchOptions& options);           // every rank takes part
std::string bench_table(const BenchResult& result);
std::string bench_csv(const BenchResult& result);
// The whole command: runs, prints on the root, writes the CSV; the exit status every rank agrees
// on (1 when any #wrong > 0).
int bench_collectives(const BenchOptions& options);

}  // namespace shardlab
