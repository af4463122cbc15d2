// What the planner and the plan search both name: a contraction's operands (A and B in, C out)
// and a test of whether a list of mesh axes holds one.
#pragma once
#include <string>
#include <vector>

namespace shardlab {

constexpr int kA = 0, kB = 1, kC = 2;

// Axis names are short; comparing them in line rather than through memcmp is a third of the
// search's time on 4-axis meshes.
inline bool same_axis(const std::string& x, const std::string& y) {
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (x[i] != y[i]) return false;
  return true;
}
inline bool contains_axis(const std::vector<std::string>& axes, const std::string& a) {
  for (const auto& x : axes)
    if (same_axis(x, a)) return true;
  return false;
}

}  // namespace shardlab
