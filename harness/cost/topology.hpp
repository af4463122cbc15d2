// A collective's time on the wiring of a hardware preset (Hardware::topology, harness/cost/cost.hpp).
// The ledger counts what each device sends; the wiring decides how long those bytes take, because
// a link may carry other devices' data too (a ring forwards it) and a torus gives a device several
// links at once. The model prices the busiest link, one direction, plus one alpha per hop and the
// preset's launch once per call.
//
// n is the whole tensor as in harness/cost/cost.hpp (all_gather: the gathered result; reduce_scatter,
// all_reduce: the input; all_to_all: one device's buffer). The group spans mesh axes of sizes
// p_1..p_k (P devices); fr = (P-1)/P.
//
//   switch         the ring algorithms' and pairwise all_to_all's terms (collective_terms): every
//                  device has its own port, so its bytes sent are its link's bytes.
//   one-way ring   all_gather, reduce_scatter: P-1 hops, n fr per link; all_reduce twice that.
//                  all_to_all: a block for the device d steps on crosses d links, so each link
//                  carries n (P-1)/2 (the scaling book, sharding chapter, question 10).
//   torus          each axis is a ring of bidirectional links when it wraps (p_i >= wrap_from),
//                  else a line. A gather over the k axes uses all their links: per link
//                  n fr / sum_i w_i (w_i = 2 for a ring, 1 for a line, both directions busy);
//                  hops sum_i ceil(p_i/2) (ring) or p_i - 1 (line); all_reduce twice that.
//                  all_to_all is priced by bisection: cutting axis i in two leaves
//                  (P/p_i) w_i links each way across the cut, and floor(p_i/2) P/p_i devices on one
//                  side each send n/P to every device of the other; the busiest cut sets the time.
//                  On one wrapped axis of even p that is n p/8 per link: a quarter of what an
//                  all_gather of the same array (n p) puts on a link, as p grows (the book's
//                  "AllGather / 4").
// The reduction (gamma) is n fr for reduce_scatter and all_reduce on every topology.
//
// Where this differs from the scaling book's worked numbers (tests/test_topology.cpp quotes them):
// the book drops fr (it writes V / W for an AllGather, where (P-1)/P V is what must arrive), and it
// takes the larger of the latency and bandwidth terms where alpha-beta adds them.
#pragma once
#include <string>
#include <vector>

#include "harness/cost/cost.hpp"

namespace shardlab {

struct TopologyTerms {
  double calls = 0;         // collective calls, each paying launch: 1 (0 for a group of one device)
  double hops = 0;          // latency: alphas on the critical path
  double link_bytes = 0;    // bytes over the busiest link, one direction
  double reduce_bytes = 0;  // bytes a device reduces
};

// Error(unsupported) for an op the model lacks; axis sizes of 1 are ignored.
TopologyTerms topology_terms(const std::string& op, const std::vector<int>& axis_sizes, double n_bytes,
                             const Hardware& hw);
double topology_seconds(const std::string& op, const std::vector<int>& axis_sizes, double n_bytes,
                        const Hardware& hw);

// "2D torus, wraparound on axes of 16 or more", "switch", "one-way ring".
std::string topology_text(const Hardware& hw);

}  // namespace shardlab
