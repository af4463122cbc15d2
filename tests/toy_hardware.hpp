// A hardware preset with round numbers, so tests can work the cost model out by hand:
// alpha 1 us, 1 GB/s links, reduction 2 GB/s, 1 TFLOP/s.
#pragma once
#include "harness/cost/cost.hpp"

namespace shardlab::testing {

inline Hardware toy_hardware(double element_bytes = 8) {
  Hardware h;
  h.name = "toy";
  h.alpha = 1e-6;
  h.bytes_per_s = 1e9;
  h.reduce_bytes_per_s = 2e9;
  h.flops_per_s = 1e12;
  h.element_bytes = element_bytes;
  return h;
}

}  // namespace shardlab::testing
