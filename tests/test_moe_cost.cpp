// harness/models/moe_cost.cpp: 64 experts, top-2, on 8 devices, by hand on nvlink-a100 (a switch:
// a launch of 6.6 us a call, alpha 0.6 us, 300 GB/s a link, reductions at 3000 GB/s, 312 TFLOP/s) and
// ethernet-100g.
#include <doctest/doctest.h>

#include "harness/cost/cost.hpp"
#include "harness/models/moe_cost.hpp"

using namespace shardlab;

TEST_CASE("moe_cost: 64 experts, top-2, 8 devices, 4096 tokens each, by hand") {
  const MoeCostShape s;  // f 1.25, m 4096, h 14336, 2 B
  const MoeCost c = moe_cost(s, hardware_preset("nvlink-a100"));
  CHECK(c.capacity == 160);  // 1.25 x 2 x 4096 / 64
  const double n = 64.0 * 160 * 4096 * 2;  // 80 MiB
  CHECK(c.buffer_bytes == n);
  // Pairwise AllToAll on a switch: one launch, 7 messages and 7/8 of the buffer over the device's port.
  const double a2a = 6.6e-6 + 7 * 0.6e-6 + n * 7 / 8 / 300e9;
  CHECK(c.all_to_all_seconds == doctest::Approx(a2a).epsilon(1e-12));
  // The router's gradient [4096, 64] x 2 B = 512 KiB, ring AllReduce over 8.
  const double r = 4096.0 * 64 * 2;
  const double all_reduce = 6.6e-6 + 14 * 0.6e-6 + 2 * r * 7 / 8 / 300e9 + r * 7 / 8 / 3000e9;
  CHECK(c.comm_seconds == doctest::Approx(4 * a2a + all_reduce).epsilon(1e-12));
  // 12 m h FLOPs for each of E C slots, and 6 T m E for the router.
  const double flops = 12.0 * 4096 * 14336 * 64 * 160 + 6.0 * 4096 * 4096 * 64;
  CHECK(c.flops == doctest::Approx(flops).epsilon(1e-12));
  CHECK(c.compute_seconds == doctest::Approx(flops / 312e12).epsilon(1e-12));
  CHECK(c.comm_seconds == doctest::Approx(1.04e-3).epsilon(0.01));
  // Ethernet's 12.5 GB/s a port: the AllToAlls as long as the compute.
  const MoeCost e = moe_cost(s, hardware_preset("ethernet-100g"));
  CHECK(e.all_to_all_seconds == doctest::Approx(6.6e-6 + 7 * 20e-6 + n * 7 / 8 / 12.5e9).epsilon(1e-12));
  CHECK(e.comm_seconds / e.total() > 0.45);
  // Twice the capacity factor, twice the buffer.
  MoeCostShape two = s;
  two.capacity_factor = 2.5;
  CHECK(moe_cost(two, hardware_preset("nvlink-a100")).buffer_bytes == 2 * n);
}
