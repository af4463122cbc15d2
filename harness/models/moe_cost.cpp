#include "harness/models/moe_cost.hpp"

#include <cmath>

#include "harness/cost/topology.hpp"

namespace shardlab {

MoeCost moe_cost(const MoeCostShape& s, const Hardware& hw) {
  MoeCost c;
  c.capacity = std::max(1.0, std::ceil(s.capacity_factor * s.top_k * s.tokens / s.experts - 1e-9));
  c.buffer_bytes = s.experts * c.capacity * s.model * s.element_bytes;
  c.all_to_all_seconds = topology_seconds("all_to_all", {s.devices}, c.buffer_bytes, hw);
  c.comm_seconds = 4 * c.all_to_all_seconds +
                   topology_seconds("all_reduce", {s.devices}, s.model * s.experts * s.element_bytes, hw);
  c.flops = 12 * s.model * s.hidden * s.experts * c.capacity + 6 * s.tokens * s.model * s.experts;
  c.compute_seconds = compute_seconds(c.flops, hw);
  return c;
}

}  // namespace shardlab
