// The modeled time of one mixture-of-experts layer's training step (forward and backward) at a real
// size, experts over one axis of p devices as in lesson 20, on a hardware preset's wiring
// (harness/cost/topology.hpp). Per device, with T tokens, E experts, top k, capacity factor f:
//   C = ceil(f k T / E) slots per expert; the buffer [E, C, m] is n = E C m e bytes (e per element)
//   communication: 4 AllToAlls of n (dispatch, combine, and both again backward) and one
//                  AllReduce of the router's gradient [m, E] over the p devices
//   compute:       the experts work on all E C slots, padding included: 2 matmuls of 2 m h FLOPs
//                  forward per slot, twice that backward: 12 m h per slot; the router 6 T m E
// Nothing overlaps: the time is communication + compute.
#pragma once
#include <string>

#include "harness/cost/cost.hpp"

namespace shardlab {

struct MoeCostShape {
  int experts = 64, top_k = 2, devices = 8;
  double capacity_factor = 1.25;
  double tokens = 4096;    // per device
  double model = 4096;     // m
  double hidden = 14336;   // h, per expert (Mixtral 8x7B's sizes)
  double element_bytes = 2;  // bfloat16
};

struct MoeCost {
  double capacity = 0;          // C
  double buffer_bytes = 0;      // n, one AllToAll's buffer per device
  double all_to_all_seconds = 0;  // one AllToAll
  double comm_seconds = 0;      // 4 AllToAlls and the router's AllReduce
  double compute_seconds = 0;
  double flops = 0;
  double total() const { return comm_seconds + compute_seconds; }
};

MoeCost moe_cost(const MoeCostShape& s, const Hardware& hw);

}  // namespace shardlab
