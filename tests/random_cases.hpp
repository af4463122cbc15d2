// Random meshes and specs for the property tests (planner, plan search, uneven blocks): written
// apart from the planner, as the tests' own source of cases.
#pragma once
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/mesh.hpp"
#include "core/spec.hpp"

namespace shardlab::testing {

using Rng = std::mt19937_64;

inline int pick(Rng& rng, int lo, int hi) {
  return lo + static_cast<int>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
}

// One to three axes X, Y, Z of sizes 1 to 4, at most 8 devices in all.
inline Mesh random_mesh(Rng& rng) {
  static const char* names[] = {"X", "Y", "Z"};
  const int rank = pick(rng, 1, 3);
  std::vector<std::string> n;
  std::vector<int> s;
  int devices = 1;
  for (int i = 0; i < rank; ++i) {
    int size = pick(rng, 1, 4);
    while (devices * size > 8) --size;
    devices *= size;
    n.push_back(names[i]);
    s.push_back(size);
  }
  return Mesh(n, s);
}

// Each mesh axis, in random order, to the end of a random dim of the `rank` or to none.
inline Spec random_spec(Rng& rng, const Mesh& mesh, std::size_t rank) {
  Spec s = Spec::replicated(rank);
  if (rank == 0) return s;
  std::vector<std::string> axes = mesh.names();
  std::shuffle(axes.begin(), axes.end(), rng);
  for (const auto& ax : axes) {
    const int d = pick(rng, -1, static_cast<int>(rank) - 1);
    if (d >= 0) s.dims[static_cast<std::size_t>(d)].push_back(ax);
  }
  return s;
}

}  // namespace shardlab::testing
