// A brute-force reference for the planner's search, kept in the tests and written
// apart from harness/plan/planner.cpp and harness/plan/plan_search.cpp.
//
// It walks every layout reachable by single steps of the move set that harness/plan/plan_search.hpp
// lists, and returns the fewest bytes one device sends to get from the operands' specs to the
// output spec. Nothing clever: each phase first lists every reachable layout breadth-first (a
// visited set), then relaxes every edge until no cost drops (Bellman-Ford), which is plainly
// right for non-negative costs.
//
//   phase 1  A alone and B alone, from their given specs (they move independently);
//   phase 2  every pair of layouts that can be multiplied gives a product layout, at the sum of
//            the two costs;
//   phase 3  the result, from every product at once, to the output spec.
//
// Moves and their bytes per device (L = bytes of the local block before the step, n = product
// of the sizes of the mesh axes involved):
//   all_gather      the last k axes of a dim's list                   (n-1) * L
//   local_slice     append an unused axis to a dim (size divisible)   0
//   all_to_all      innermost axis of dim i to the end of dim j       (n-1)/n * L  (dim j divisible)
//   all_reduce      any nonempty set of the partial axes              2(n-1)/n * L (ring, chunked)
//   reduce_scatter  an ordered run of partial axes onto a dim         (n-1)/n * L  (divisible)
// The last two exist only for the result. Mesh axes of size 1 are dropped from every spec.
#pragma once
#include <algorithm>
#include <cstddef>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/einsum.hpp"
#include "core/mesh.hpp"
#include "core/spec.hpp"
#include "harness/plan/planner.hpp"

namespace shardlab::brute {

// A layout with mesh axes as indices into the mesh: per dim the axes, major first, and the
// partial-sum axes as a bit set (their order means nothing).
struct Layout {
  std::vector<std::vector<int>> dims;
  unsigned partial = 0;
  bool operator<(const Layout& o) const { return dims != o.dims ? dims < o.dims : partial < o.partial; }
  bool operator==(const Layout& o) const { return dims == o.dims && partial == o.partial; }
};

struct World {
  std::vector<std::string> names;
  std::vector<int> sizes;
  std::size_t element_bytes = 8;
};

// One step from a layout: where it leads, what it costs, and a line for failure messages.
struct Move {
  Layout to;
  std::size_t bytes = 0;
  int kind = 0;  // 0 gather, 1 slice, 2 all_to_all, 3 all_reduce, 4 reduce_scatter
  int dim = -1, dim2 = -1;
  std::vector<int> axes;
};

inline unsigned axes_used(const Layout& l) {
  unsigned m = l.partial;
  for (const auto& d : l.dims)
    for (int ax : d) m |= 1u << ax;
  return m;
}

inline std::size_t group_size(const World& w, const std::vector<int>& axes) {
  std::size_t n = 1;
  for (int ax : axes) n *= static_cast<std::size_t>(w.sizes[ax]);
  return n;
}

inline std::size_t local_dim(const World& w, const Shape& global, const Layout& l, std::size_t d) {
  return global[d] / group_size(w, l.dims[d]);
}

inline std::size_t local_elements(const World& w, const Shape& global, const Layout& l) {
  std::size_t e = 1;
  for (std::size_t d = 0; d < global.size(); ++d) e *= local_dim(w, global, l, d);
  return e;
}

// Ring AllReduce of e elements over n devices: the buffer is cut into n chunks, the first e % n
// of them one element longer. Each device sends all chunks but one in the reduce-scatter half
// and all chunks but the next one in the all-gather half; the busiest device counts.
inline std::size_t all_reduce_bytes(std::size_t e, std::size_t n, std::size_t element_bytes) {
  if (n <= 1) return 0;
  auto len = [&](std::size_t r) { return e / n + (r < e % n ? 1 : 0); };
  std::size_t busiest = 0;
  for (std::size_t r = 0; r < n; ++r) busiest = std::max(busiest, 2 * e - len(r) - len((r + 1) % n));
  return busiest * element_bytes;
}

// Every ordered run of distinct axes taken from the bit set `mask` (nonempty).
inline void ordered_runs(const World& w, unsigned mask, std::vector<int>& run, std::vector<std::vector<int>>& out) {
  for (int ax = 0; ax < static_cast<int>(w.sizes.size()); ++ax) {
    if (!(mask & (1u << ax))) continue;
    run.push_back(ax);
    out.push_back(run);
    ordered_runs(w, mask & ~(1u << ax), run, out);
    run.pop_back();
  }
}

// Every single step from `l`, a tensor of global shape `shape`.
inline std::vector<Move> moves_from(const World& w, const Shape& shape, const Layout& l) {
  std::vector<Move> out;
  const std::size_t block = local_elements(w, shape, l) * w.element_bytes;
  const unsigned used = axes_used(l);
  const std::size_t rank = l.dims.size();
  for (std::size_t d = 0; d < rank; ++d) {
    const auto& list = l.dims[d];
    // Gather the last k axes of this dim.
    for (std::size_t k = 1; k <= list.size(); ++k) {
      Move m{l, 0, 0, static_cast<int>(d), -1, std::vector<int>(list.end() - k, list.end())};
      m.to.dims[d].resize(list.size() - k);
      m.bytes = (group_size(w, m.axes) - 1) * block;
      out.push_back(std::move(m));
    }
    // Slice this dim further by an axis nothing uses yet.
    for (int ax = 0; ax < static_cast<int>(w.sizes.size()); ++ax) {
      if (used & (1u << ax)) continue;
      if (local_dim(w, shape, l, d) % static_cast<std::size_t>(w.sizes[ax]) != 0) continue;
      Move m{l, 0, 1, static_cast<int>(d), -1, {ax}};
      m.to.dims[d].push_back(ax);
      out.push_back(std::move(m));
    }
    // Move this dim's innermost axis to the end of another dim.
    if (!list.empty()) {
      const int ax = list.back();
      const std::size_t n = static_cast<std::size_t>(w.sizes[ax]);
      for (std::size_t j = 0; j < rank; ++j) {
        if (j == d || local_dim(w, shape, l, j) % n != 0) continue;
        Move m{l, (n - 1) * block / n, 2, static_cast<int>(d), static_cast<int>(j), {ax}};
        m.to.dims[d].pop_back();
        m.to.dims[j].push_back(ax);
        out.push_back(std::move(m));
      }
    }
  }
  if (l.partial) {
    // AllReduce any nonempty subset of the partial axes.
    for (unsigned s = l.partial; s; s = (s - 1) & l.partial) {
      Move m{l, 0, 3, -1, -1, {}};
      for (int ax = 0; ax < static_cast<int>(w.sizes.size()); ++ax)
        if (s & (1u << ax)) m.axes.push_back(ax);
      m.to.partial &= ~s;
      m.bytes = all_reduce_bytes(block / w.element_bytes, group_size(w, m.axes), w.element_bytes);
      out.push_back(std::move(m));
    }
    // ReduceScatter an ordered run of partial axes onto the end of a dim.
    std::vector<std::vector<int>> runs;
    std::vector<int> scratch;
    ordered_runs(w, l.partial, scratch, runs);
    for (const auto& run : runs) {
      const std::size_t n = group_size(w, run);
      for (std::size_t d = 0; d < rank; ++d) {
        if (local_dim(w, shape, l, d) % n != 0) continue;
        Move m{l, (n - 1) * block / n, 4, static_cast<int>(d), -1, run};
        for (int ax : run) {
          m.to.dims[d].push_back(ax);
          m.to.partial &= ~(1u << ax);
        }
        out.push_back(std::move(m));
      }
    }
  }
  return out;
}

inline std::string axes_names(const World& w, const std::vector<int>& axes) {
  std::string s;
  for (int ax : axes) s += (s.empty() ? "" : ",") + w.names[ax];
  return s;
}

inline Spec to_spec(const World& w, const Layout& l) {
  Spec s;
  for (const auto& d : l.dims) {
    s.dims.emplace_back();
    for (int ax : d) s.dims.back().push_back(w.names[ax]);
  }
  for (int ax = 0; ax < static_cast<int>(w.sizes.size()); ++ax)
    if (l.partial & (1u << ax)) s.partial.push_back(w.names[ax]);
  return s;
}

inline std::string describe(const World& w, const std::string& tensor, const Layout& from, const Move& m) {
  static const char* kinds[] = {"all_gather", "local_slice", "all_to_all", "all_reduce", "reduce_scatter"};
  std::string s = std::string(kinds[m.kind]) + " " + tensor + " over " + axes_names(w, m.axes);
  if (m.dim >= 0) s += " dim " + std::to_string(m.dim);
  if (m.dim2 >= 0) s += "->" + std::to_string(m.dim2);
  return s + ": " + to_spec(w, from).text() + " -> " + to_spec(w, m.to).text() + ", " + std::to_string(m.bytes) + " B";
}

// Cheapest cost of every layout reachable from the given starting layouts (with their starting
// costs), and for each the edge that last lowered it.
struct Reach {
  std::vector<Layout> states;
  std::map<Layout, int> index;
  std::vector<std::size_t> cost;
  std::vector<int> from;      // predecessor state, -1 for a start
  std::vector<Move> via;      // the move from it
};

inline Reach explore(const World& w, const Shape& shape, const std::vector<std::pair<Layout, std::size_t>>& starts) {
  constexpr std::size_t inf = std::numeric_limits<std::size_t>::max();
  Reach r;
  auto add = [&](const Layout& l) {
    auto it = r.index.find(l);
    if (it != r.index.end()) return it->second;
    const int id = static_cast<int>(r.states.size());
    r.index.emplace(l, id);
    r.states.push_back(l);
    r.cost.push_back(inf);
    r.from.push_back(-1);
    r.via.emplace_back();
    return id;
  };
  for (const auto& [l, c] : starts) {
    const int id = add(l);
    r.cost[id] = std::min(r.cost[id], c);
  }
  // Breadth-first listing of every reachable layout and of every edge.
  struct Edge { int u, v; Move m; };
  std::vector<Edge> edges;
  for (std::size_t next = 0; next < r.states.size(); ++next) {
    const Layout here = r.states[next];
    for (auto& m : moves_from(w, shape, here)) {
      const int v = add(m.to);
      edges.push_back({static_cast<int>(next), v, std::move(m)});
    }
  }
  // Relax until nothing changes.
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& e : edges) {
      if (r.cost[e.u] == inf || r.cost[e.u] + e.m.bytes >= r.cost[e.v]) continue;
      r.cost[e.v] = r.cost[e.u] + e.m.bytes;
      r.from[e.v] = e.u;
      r.via[e.v] = e.m;
      changed = true;
    }
  }
  return r;
}

// The steps that reach state s, first to last.
inline std::vector<std::string> path_to(const World& w, const std::string& tensor, const Reach& r, int s) {
  std::vector<std::string> steps;
  for (int at = s; r.from[at] >= 0; at = r.from[at])
    steps.push_back(describe(w, tensor, r.states[r.from[at]], r.via[at]));
  std::reverse(steps.begin(), steps.end());
  return steps;
}

// A spec as a layout, without mesh axes of size 1.
inline Layout to_layout(const Mesh& mesh, const Spec& spec) {
  Layout l;
  for (const auto& d : spec.dims) {
    l.dims.emplace_back();
    for (const auto& ax : d)
      if (mesh.axis_size(ax) > 1) l.dims.back().push_back(mesh.axis(ax));
  }
  for (const auto& ax : spec.partial)
    if (mesh.axis_size(ax) > 1) l.partial |= 1u << mesh.axis(ax);
  return l;
}

struct Cheapest {
  std::size_t bytes = 0;
  std::vector<std::string> steps;  // one cheapest plan, as lines
};

// Every product layout some pair of operand layouts (reached as `ra` and `rb` list them) can be
// multiplied into, with the cheapest such pair and the sum of their costs.
inline std::map<Layout, std::pair<std::size_t, std::pair<int, int>>> brute_products(const Einsum& eq, const World& w,
                                                                                    const Reach& ra, const Reach& rb) {
  (void)w;
  // Which dims of A and B hold the shared letters, and which hold the free ones.
  std::vector<std::pair<std::size_t, std::size_t>> shared;
  std::vector<std::size_t> a_free, b_free;
  for (std::size_t i = 0; i < eq.a.size(); ++i) {
    const auto j = eq.b.find(eq.a[i]);
    if (j != std::string::npos) shared.push_back({i, j});
    else a_free.push_back(i);
  }
  for (std::size_t j = 0; j < eq.b.size(); ++j)
    if (eq.a.find(eq.b[j]) == std::string::npos) b_free.push_back(j);
  auto mask_of = [](const Layout& l, const std::vector<std::size_t>& dims) {
    unsigned m = 0;
    for (auto d : dims)
      for (int ax : l.dims[d]) m |= 1u << ax;
    return m;
  };

  // Every multiplicable pair gives a product layout; keep the cheapest pair for each.
  std::map<Layout, std::pair<std::size_t, std::pair<int, int>>> products;
  for (std::size_t i = 0; i < ra.states.size(); ++i) {
    const Layout& la = ra.states[i];
    const unsigned fa = mask_of(la, a_free);
    for (std::size_t j = 0; j < rb.states.size(); ++j) {
      const Layout& lb = rb.states[j];
      bool ok = (fa & mask_of(lb, b_free)) == 0;
      for (std::size_t s = 0; ok && s < shared.size(); ++s) ok = la.dims[shared[s].first] == lb.dims[shared[s].second];
      if (!ok) continue;
      Layout p;
      for (char c : eq.out) {
        const auto ia = eq.a.find(c);
        p.dims.push_back(ia != std::string::npos ? la.dims[ia] : lb.dims[eq.b.find(c)]);
      }
      for (std::size_t d = 0; d < eq.a.size(); ++d)
        if (eq.out.find(eq.a[d]) == std::string::npos)
          for (int ax : la.dims[d]) p.partial |= 1u << ax;
      const std::size_t c = ra.cost[i] + rb.cost[j];
      auto it = products.find(p);
      if (it == products.end() || c < it->second.first) products[p] = {c, {static_cast<int>(i), static_cast<int>(j)}};
    }
  }
  return products;
}

// The cheapest plan's bytes per device and steps; nullopt when no sequence of moves reaches `out`.
// The operands' specs must be valid for their shapes (no partial sums) and `out` valid for the
// output's shape.
inline std::optional<Cheapest> brute_cheapest(const Einsum& eq, const Mesh& mesh, const Operand& a, const Operand& b,
                                              const Spec& out, std::size_t element_bytes) {
  constexpr std::size_t inf = std::numeric_limits<std::size_t>::max();
  const World w{mesh.names(), mesh.sizes(), element_bytes};
  const Shape out_shape = shape_for(eq.out, eq.sizes(a.shape, b.shape));
  const Reach ra = explore(w, a.shape, {{to_layout(mesh, a.spec), 0}});
  const Reach rb = explore(w, b.shape, {{to_layout(mesh, b.spec), 0}});

  const auto products = brute_products(eq, w, ra, rb);
  if (products.empty()) return std::nullopt;  // cannot happen: gathering everything always multiplies

  std::vector<std::pair<Layout, std::size_t>> starts;
  for (const auto& [p, c] : products) starts.push_back({p, c.first});
  const Reach rc = explore(w, out_shape, starts);
  const auto target = rc.index.find(to_layout(mesh, out));
  if (target == rc.index.end() || rc.cost[target->second] == inf) return std::nullopt;

  // Walk back to the product the cheapest path starts from, then to its pair of operand layouts.
  const int t = target->second;
  int first = t;
  while (rc.from[first] >= 0) first = rc.from[first];
  const auto pair = products.at(rc.states[first]).second;
  Cheapest best;
  best.bytes = rc.cost[t];
  for (auto& s : path_to(w, a.name, ra, pair.first)) best.steps.push_back(s);
  for (auto& s : path_to(w, b.name, rb, pair.second)) best.steps.push_back(s);
  best.steps.push_back("contract: " + to_spec(w, ra.states[pair.first]).text() + " x " +
                       to_spec(w, rb.states[pair.second]).text() + " -> " + to_spec(w, rc.states[first]).text());
  for (auto& s : path_to(w, "C", rc, t)) best.steps.push_back(s);
  return best;
}

inline std::optional<std::size_t> brute_min_bytes(const Einsum& eq, const Mesh& mesh, const Operand& a,
                                                  const Operand& b, const Spec& out, std::size_t element_bytes) {
  const auto c = brute_cheapest(eq, mesh, a, b, out, element_bytes);
  if (!c) return std::nullopt;
  return c->bytes;
}

// Every layout a contraction's result can be left in, from operands lying as `a` and `b` (shapes
// `a_shape`, `b_shape`), with the fewest bytes per device that leave it so; partial layouts too.
inline Reach brute_outputs(const Einsum& eq, const World& w, const Shape& a_shape, const Layout& a,
                           const Shape& b_shape, const Layout& b) {
  const Reach ra = explore(w, a_shape, {{a, 0}});
  const Reach rb = explore(w, b_shape, {{b, 0}});
  std::vector<std::pair<Layout, std::size_t>> starts;
  for (const auto& [p, c] : brute_products(eq, w, ra, rb)) starts.push_back({p, c.first});
  return explore(w, shape_for(eq.out, eq.sizes(a_shape, b_shape)), starts);
}

inline std::string steps_text(const Cheapest& c) {
  std::string s;
  for (const auto& line : c.steps) s += "  " + line + "\n";
  return s + "  total " + std::to_string(c.bytes) + " B per device";
}

}  // namespace shardlab::brute
