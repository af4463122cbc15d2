#include "harness/cost/topology.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace shardlab {

namespace {

bool wraps(int size, const Hardware& hw) { return hw.wrap_from == 0 || size >= hw.wrap_from; }

TopologyTerms torus_terms(const std::string& op, const std::vector<int>& sizes, double n, const Hardware& hw) {
  double p = 1, ways = 0, hops = 0;
  for (int s : sizes) {
    p *= s;
    ways += wraps(s, hw) ? 2 : 1;
    hops += wraps(s, hw) ? (s + 1) / 2 : s - 1;
  }
  const double fr = (p - 1) / p;
  // collective_permute, priced as a shift by one member in the group's order (ring attention's
  // step; n is one block): a block whose neighbour lies across a wrapped axis is one hop away; on
  // an axis that does not wrap, the last device's block runs back along the line's other direction,
  // p_i - 1 hops, each of those links carrying only that block. So n on the busiest link, and
  // sum_i (1 or p_i - 1) hops for the block that carries across every axis (routed axis by axis).
  // On a switch and a one-way ring (collective_terms): one hop, n.
  if (op == "collective_permute") {
    double far = 0;
    for (int s : sizes) far += wraps(s, hw) ? 1 : s - 1;
    return {1, far, n, 0};
  }
  if (op == "all_to_all") {
    double busiest = 0;
    for (int s : sizes) {
      const double side = double(s / 2) * (p / s), links = (p / s) * (wraps(s, hw) ? 2 : 1);
      busiest = std::max(busiest, side * (p - side) * (n / p) / links);
    }
    return {1, hops, busiest, 0};
  }
  const double gather = n * fr / ways;
  if (op == "all_gather") return {1, hops, gather, 0};
  if (op == "reduce_scatter") return {1, hops, gather, n * fr};
  return {1, 2 * hops, 2 * gather, n * fr};  // all_reduce
}

}  // namespace

TopologyTerms topology_terms(const std::string& op_name, const std::vector<int>& axis_sizes, double n,
                             const Hardware& hw) {
  const std::string op = op_name == "all_reduce_max" ? "all_reduce" : op_name;  // priced alike
  if (op != "all_gather" && op != "reduce_scatter" && op != "all_reduce" && op != "all_to_all" &&
      op != "collective_permute")
    throw Error(ErrorKind::unsupported, "the cost model has no " + op);
  std::vector<int> sizes;
  int p = 1;
  for (int s : axis_sizes)
    if (s > 1) {
      sizes.push_back(s);
      p *= s;
    }
  if (p == 1) return {};
  if (hw.topology == Topology::torus) return torus_terms(op, sizes, n, hw);
  const Algorithm algo = op == "all_to_all" || op == "collective_permute" ? Algorithm::pairwise : Algorithm::ring;
  const CollectiveTerms t = collective_terms(op, algo, p, n);
  if (hw.topology == Topology::one_way_ring && op == "all_to_all") return {t.calls, t.steps, n * (p - 1) / 2, 0};
  return {t.calls, t.steps, t.link_bytes, t.reduce_bytes};
}

double topology_seconds(const std::string& op, const std::vector<int>& axis_sizes, double n, const Hardware& hw) {
  const TopologyTerms t = topology_terms(op, axis_sizes, n, hw);
  return latency_seconds(t.calls, t.hops, hw) + bandwidth_seconds(t.link_bytes, t.reduce_bytes, hw);
}

std::string topology_text(const Hardware& hw) {
  if (hw.topology != Topology::torus) return topology_name(hw.topology);
  std::string t = (hw.torus_dims > 0 ? std::to_string(hw.torus_dims) + "D " : std::string()) + "torus";
  return t + (hw.wrap_from == 0 ? "" : ", wraps on axes >= " + std::to_string(hw.wrap_from));
}

}  // namespace shardlab
