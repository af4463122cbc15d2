// Cost model: the alpha-beta-gamma time of each collective algorithm, hardware presets, and a
// compute rate so a step's compute can be modeled beside its communication.
//
// p devices in the group; n bytes = the whole tensor (all_gather: the gathered result;
// reduce_scatter and all_reduce: the input; all_to_all: the local buffer).
// alpha = seconds per message (latency), beta = seconds per byte on a link (1/bandwidth),
// gamma = seconds per byte reduced (1/reduction rate). Every collective over two or more devices
// also pays `launch` once per call, whatever p and n: the fixed cost of starting it (a GPU kernel
// launch and NCCL's setup of the call, the host's MPI call), which dominates small messages on
// GPUs. The terms below leave it out; the time is launch + the terms.
//
//   ring all_gather          (p-1) a + n (p-1)/p b
//   ring reduce_scatter      (p-1) a + n (p-1)/p b + n (p-1)/p g
//   ring all_reduce          2(p-1) a + 2n (p-1)/p b + n (p-1)/p g      (= reduce_scatter + all_gather)
//                            all_reduce_max is priced as all_reduce (g: one compare per element)
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

// How the devices are wired, which prices a collective beyond its bytes per device
// (harness/cost/topology.hpp): a one-way ring; a torus of bidirectional links, where a collective
// over k mesh axes uses the links of all k (TPU ICI); or a switch giving every device its own
// port to every other (NVLink/NVSwitch, Ethernet, shared memory).
enum class Topology { one_way_ring, torus, switched };
std::string topology_name(Topology t);  // "one-way ring", "torus", "switch"

struct Hardware {
  std::string name;
  std::string description;
  std::string source;        // where the numbers come from
  double alpha = 0;          // s per message
  double launch = 0;         // s per collective call, paid once whatever p and n (0: none modeled)
  double bytes_per_s = 0;    // link bandwidth, one direction (1/beta)
  double reduce_bytes_per_s = 0;  // reduction rate (1/gamma)
  double flops_per_s = 0;    // dense matmul rate of one device
  // Bytes per element of the data the preset's rates describe: 4 for the accelerators (float32,
  // the article's dtype; their matmul rate is the bf16/TF32 peak that float32 matmuls run at by
  // default on TPUs), 8 for this-machine (float64, what shardlab moves and computes). Sweeps
  // scale shardlab's float64 byte counts by element_bytes / 8.
  double element_bytes = 8;
  Topology topology = Topology::switched;
  int torus_dims = 0;  // torus: its physical axes (2 or 3), for the description
  int wrap_from = 0;   // torus: an axis of this many devices or more has wraparound links (0: every axis)
};

const std::vector<Hardware>& hardware_presets();
const Hardware& hardware_preset(const std::string& name);  // Error(parse) naming the presets
// The same lookup in another list (presets_with_machine's, harness/cost/machine.hpp).
const Hardware& hardware_preset(const std::string& name, const std::vector<Hardware>& presets);

enum class Algorithm { ring, recursive_doubling, pairwise };
std::string algorithm_name(Algorithm a);

// The four terms of one collective's time on a device: calls (1, or 0 for a group of one device,
// which sends nothing; each pays launch), steps (messages it sends, each paying alpha), bytes it
// sends over a link (each paying beta) and bytes it reduces (each paying gamma).
// link_bytes is what the ledger counts for a run of the same algorithm.
struct CollectiveTerms {
  double calls = 0, steps = 0, link_bytes = 0, reduce_bytes = 0;
};
// The latency part of a collective's time, calls launch + steps alpha; the bandwidth part,
// link_bytes beta + reduce_bytes gamma. Every modeled time is their sum.
double latency_seconds(double calls, double steps, const Hardware& hw);
double bandwidth_seconds(double link_bytes, double reduce_bytes, const Hardware& hw);
// Error(unsupported) for a combination the model lacks or recursive doubling on a p that is not a
// power of two.
CollectiveTerms collective_terms(const std::string& op, Algorithm algorithm, int p, double n_bytes);
// Modeled seconds of one collective: launch + steps a + link_bytes b + reduce_bytes g.
double collective_seconds(const std::string& op, Algorithm algorithm, int p, double n_bytes, const Hardware& hw);
// The algorithm's steps (messages each device sends): ring p-1 (all_reduce 2(p-1)), doubling log2 p.
double collective_steps(const std::string& op, Algorithm algorithm, int p);

// The message size above which ring is faster than recursive doubling on `hw`: 0 when ring is
// never slower, +infinity when it never wins (all_gather: both send n(p-1)/p, doubling in fewer steps).
double ring_faster_above_bytes(const std::string& op, int p, const Hardware& hw);

// The timings of one collective for fit_link: sizes n_i (the whole tensor, as above), seconds t_i.
struct Timings {
  std::string op;
  Algorithm algorithm = Algorithm::ring;
  int p = 2;
  std::vector<double> n_bytes, seconds;
};
// Launch, alpha and link rate fitted to measured times of one or more collectives, the reduction
// rate given: time = launch + steps alpha + link_bytes / rate + reduce_bytes / reduce rate.
// The rate: least squares on relative error over each collective's large sizes (its largest down to
// 1/64 of it, at least two sizes), each collective with an intercept of its own. Then each
// collective's latency: the median, over its smaller sizes, of their time beyond their bytes at
// that rate (with no smaller sizes, its intercept). Launch and alpha: the line latency = launch +
// steps alpha through the collectives' latencies, which needs two step counts or more (all_gather
// p-1 against all_reduce 2(p-1)). With one step count the two cannot be told apart: launch is 0 and
// alpha the median latency per step (launch_fitted false). A negative launch or alpha is clamped to
// 0 and the other refitted alone. Error(unsupported) when a collective has fewer than two sizes, or
// when the fit gives no positive rate.
struct LinkFit {
  double launch = 0, alpha = 0, bytes_per_s = 0;
  bool launch_fitted = false;   // two step counts or more: launch and alpha fitted apart
  double max_rel_err = 0;       // largest |model - measured| / measured over all the points
  double max_rel_err_rate = 0;  // the same over the points the rate was fitted to
  double rate_from_bytes = 0;   // the smallest size the rate was fitted to (the largest such over the collectives)
  std::size_t points = 0, rate_points = 0;
};
LinkFit fit_link(const std::vector<Timings>& collectives, double reduce_bytes_per_s);
// One collective's timings.
LinkFit fit_link(const std::string& op, Algorithm algorithm, int p, const std::vector<double>& n_bytes,
                 const std::vector<double>& seconds, double reduce_bytes_per_s);

double compute_seconds(double flops, const Hardware& hw);

}  // namespace shardlab
