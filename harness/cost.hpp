// Cost model: the alpha-beta-gamma time of each collective algorithm, hardware presets, and a
// compute rate so a step's compute can be modeled beside its communication.
//
// p devices in the group; n bytes = the whole tensor (all_gather: the gathered result;
// reduce_scatter and all_reduce: the input; all_to_all: the local buffer).
// alpha = seconds per message (latency), beta = seconds per byte on a link (1/bandwidth),
// gamma = seconds per byte reduced (1/reduction rate).
//
//   ring all_gather          (p-1) a + n (p-1)/p b
//   ring reduce_scatter      (p-1) a + n (p-1)/p b + n (p-1)/p g
//   ring all_reduce          2(p-1) a + 2n (p-1)/p b + n (p-1)/p g      (= reduce_scatter + all_gather)
//   recursive doubling all_gather       log2(p) a + n (p-1)/p b
//   recursive halving reduce_scatter    log2(p) a + n (p-1)/p (b + g)
//   recursive doubling all_reduce       log2(p) a + n log2(p) (b + g)
//   pairwise all_to_all      (p-1) a + n (p-1)/p b
// Recursive doubling needs p a power of two. Ring moves the least data (bandwidth-optimal);
// recursive doubling takes the fewest steps (latency-optimal), so it wins for small messages.
#pragma once
#include <string>
#include <vector>

namespace shardlab {

struct Hardware {
  std::string name;
  std::string description;
  std::string source;        // where the numbers come from
  double alpha = 0;          // s per message
  double bytes_per_s = 0;    // link bandwidth, one direction (1/beta)
  double reduce_bytes_per_s = 0;  // reduction rate (1/gamma)
  double flops_per_s = 0;    // dense matmul rate of one device
  // Bytes per element of the data the preset's rates describe: 4 for the accelerators (float32,
  // the article's dtype; their matmul rate is the bf16/TF32 peak that float32 matmuls run at by
  // default on TPUs), 8 for this-machine (float64, what shardlab moves and computes). Sweeps
  // scale shardlab's float64 byte counts by element_bytes / 8.
  double element_bytes = 8;
};

const std::vector<Hardware>& hardware_presets();
const Hardware& hardware_preset(const std::string& name);  // Error(parse) naming the presets

enum class Algorithm { ring, recursive_doubling, pairwise };
std::string algorithm_name(Algorithm a);

// Modeled seconds of one collective; Error(unsupported) for a combination the model lacks.
double collective_seconds(const std::string& op, Algorithm algorithm, int p, double n_bytes, const Hardware& hw);
// The algorithm's steps (messages each device sends): ring p-1 (all_reduce 2(p-1)), doubling log2 p.
double collective_steps(const std::string& op, Algorithm algorithm, int p);

double compute_seconds(double flops, const Hardware& hw);

}  // namespace shardlab
