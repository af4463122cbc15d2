#include "harness/plan/natural.hpp"

#include <algorithm>
#include <map>

namespace shardlab {

namespace {

int split_ways(const Mesh& mesh, const Spec& s) {
  int n = 1;
  for (const auto& d : s.dims)
    for (const auto& x : d) n *= mesh.axis_size(x);
  return n;
}

}  // namespace

Spec natural_output(const Einsum& eq, const Mesh& mesh, const Spec& a, const Spec& b, const Shape& out_shape,
                    bool keep_b_on_clash) {
  std::map<char, std::vector<std::string>> axes;
  auto take = [&](const std::string& letters, const Spec& s) {
    for (std::size_t i = 0; i < letters.size(); ++i) axes.emplace(letters[i], s.dims[i]);
  };
  if (split_ways(mesh, b) > split_ways(mesh, a)) {
    take(eq.b, b);
    take(eq.a, a);
  } else {
    take(eq.a, a);
    take(eq.b, b);
  }
  std::vector<std::size_t> order;
  for (std::size_t d = 0; d < eq.out.size(); ++d) order.push_back(d);
  if (keep_b_on_clash) {
    const std::string b_free = eq.b_free();
    std::stable_partition(order.begin(), order.end(),
                          [&](std::size_t d) { return b_free.find(eq.out[d]) != std::string::npos; });
  }
  Spec out = Spec::replicated(eq.out.size());
  std::vector<std::string> used;
  for (std::size_t d : order) {
    std::size_t left = out_shape[d];
    for (const auto& x : axes[eq.out[d]]) {
      const std::size_t n = static_cast<std::size_t>(mesh.axis_size(x));
      if (std::find(used.begin(), used.end(), x) != used.end() || (left % n != 0 && mesh.uneven() == Uneven::none))
        continue;
      used.push_back(x);
      left = (left + n - 1) / n;
      out.dims[d].push_back(x);
    }
  }
  return out;
}

}  // namespace shardlab
