// Memory and communication per device of plain data parallelism and ZeRO's three stages (article
// 004; the ZeRO paper, Rajbhandari et al. 2020). Mixed precision: every parameter is held as a
// 2-byte copy, its gradient in 2 bytes, and K bytes of optimizer state (Adam: a 4-byte master copy,
// momentum and variance, K = 12; SGD with momentum: master copy and momentum, K = 8). With P
// parameters on D devices:
//   plain DP   (2 + 2 + K) P             everything replicated
//   ZeRO-1     2P + 2P + K P / D         optimizer states split
//   ZeRO-2     2P + (2 + K) P / D        gradients split too
//   ZeRO-3     (2 + 2 + K) P / D         parameters split too
// Bytes each device sends per step (ring collectives over the D devices, 2-byte elements):
//   plain DP   AllReduce of the gradients                      2 (D-1)/D x 2P
//   ZeRO-1, 2  ReduceScatter of gradients, AllGather of params  2 (D-1)/D x 2P  (the same)
//   ZeRO-3     AllGather of params forward and again backward,
//              ReduceScatter of gradients                      3 (D-1)/D x 2P  (1.5x)
#pragma once
#include <string>
#include <vector>

#include "core/mesh.hpp"

namespace shardlab {

struct ZeroStage {
  std::string name;        // "plain DP", "ZeRO-1", ...
  double param_bytes = 0, grad_bytes = 0, state_bytes = 0;  // per device
  double sent_bytes = 0;   // per device per step
  double memory_bytes() const { return param_bytes + grad_bytes + state_bytes; }
};

// Error(parse) for an optimizer other than adam or sgd.
double optimizer_state_bytes(const std::string& optimizer);  // K
// P that does not divide D: chunk (torch.chunk's parts of ceil(P/D), the busiest device
// holds ceil(P/D) and sends P minus the smallest part per ring op), pad (ceil(P/D) each, D-1 padded
// parts per op) or none (Error(not_divisible)).
std::vector<ZeroStage> zero_stages(double params, int devices, const std::string& optimizer,
                                   Uneven uneven = Uneven::chunk);

// "7.5B" -> 7.5e9 (K, M, B for billion, T; or a plain number). Error(parse) naming `what` for
// anything else, zero, a negative or an absurd count (over 1e15).
double parse_param_count(const std::string& text, const std::string& what);

}  // namespace shardlab
