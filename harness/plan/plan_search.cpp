#include "harness/plan/plan_search.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <unordered_map>


#include "collectives/predict.hpp"
#include "harness/cost/cost.hpp"
#include "harness/cost/topology.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/text.hpp"
#include "harness/plan/natural.hpp"
#include "harness/plan/operands.hpp"
#include "harness/plan/uneven_steps.hpp"

namespace shardlab {

// The spec without axes of size 1 (they split nothing).
Spec without_unit_axes(const Mesh& mesh, Spec s) {
  auto drop = [&](std::vector<std::string>& l) {
    l.erase(std::remove_if(l.begin(), l.end(), [&](const std::string& a) { return mesh.axis_size(a) == 1; }), l.end());
  };
  for (auto& d : s.dims) drop(d);
  drop(s.partial);
  return s;
}

namespace {

using Axes = std::vector<std::string>;
int axis_of(const Mesh& mesh, const std::string& a) {
  const auto& names = mesh.names();
  for (std::size_t i = 0; i < names.size(); ++i)
    if (same_axis(names[i], a)) return static_cast<int>(i);
  return mesh.axis(a);  // throws, naming the axis
}
int size_of(const Mesh& mesh, const std::string& a) { return mesh.sizes()[static_cast<std::size_t>(axis_of(mesh, a))]; }
int size_of(const Mesh& mesh, const Axes& axes) {
  int n = 1;
  for (const auto& a : axes) n *= size_of(mesh, a);
  return n;
}

// What a path costs: the objective (bytes one device sends, or modeled seconds), then bytes, then
// how many collectives, then the FLOPs per device of the product it multiplies (set at the
// product; steps add none), so ties between products go to the one that computes less.
struct Cost {
  double key = 0;
  std::size_t bytes = 0;
  int collectives = 0;
  double flops = 0;
  bool operator<(const Cost& o) const {
    if (key != o.key) return key < o.key;
    if (bytes != o.bytes) return bytes < o.bytes;
    return collectives != o.collectives ? collectives < o.collectives : flops < o.flops;
  }
  bool operator==(const Cost& o) const {
    return key == o.key && bytes == o.bytes && collectives == o.collectives && flops == o.flops;
  }
  Cost operator+(const Cost& o) const {
    return {key + o.key, bytes + o.bytes, collectives + o.collectives, flops + o.flops};
  }
};

// One step on one tensor: what it does and the spec it leads to.
struct Move {
  StepKind kind = StepKind::contract;
  Axes axes;
  int dim = -1, to_dim = -1;
  Spec after;
};

// The tensor a search runs on: its global shape, element size, and the hardware of a time objective.
struct Subject {
  const Mesh& mesh;
  Shape shape;
  std::size_t element_bytes;
  const Hardware* hw = nullptr;
  // Moves may split a dim that does not divide: only when the problem already has such
  // a dim and the mesh allows it, so that even problems are searched exactly as before.
  bool uneven = false;
};

// A spec that splits some dim of `shape` unevenly, on a mesh that allows it.
bool uneven_split(const Mesh& mesh, const Spec& s, const Shape& shape) {
  return mesh.uneven() != Uneven::none && s.rank() == shape.size() && !is_even(mesh, s, shape);
}

// The block one device holds: each dim divided by the sizes of its axes (the search only makes
// splits that divide; anything else goes through local_shape's checks).
Shape block_shape(const Subject& t, const Spec& s) {
  Shape out = t.shape;
  for (std::size_t d = 0; d < s.rank() && d < out.size(); ++d) {
    const std::size_t n = static_cast<std::size_t>(size_of(t.mesh, s.dims[d]));
    if (n == 0 || out[d] % n != 0) return local_shape(t.mesh, s, t.shape);
    out[d] /= n;
  }
  return s.rank() == out.size() ? out : local_shape(t.mesh, s, t.shape);
}

// The cost of a step of `kind` over `axes` from a layout whose block is `local`.
Cost cost_of(const Subject& t, const Shape& local, StepKind kind, const Axes& axes) {
  if (kind == StepKind::local_slice) return {};
  const std::string op = step_kind_name(kind);
  const int p = size_of(t.mesh, axes);
  const std::size_t in = bytes_of(local, t.element_bytes);
  const std::size_t sent = predicted_bytes_sent(op, p, in, t.element_bytes);
  if (!t.hw) return {double(sent), sent, 1};
  // The model's n is the whole tensor of the collective: the gathered result of an AllGather,
  // the input of the others (as harness/models/step_cost.cpp prices the FFN's steps).
  const double whole = kind == StepKind::all_gather ? double(in) * p : double(in);
  std::vector<int> sizes;
  for (const auto& a : axes) sizes.push_back(size_of(t.mesh, a));
  return {topology_seconds(op, sizes, whole, *t.hw), sent, 1};
}

// The cost of a move from spec `before` to `after`: cost_of, except for a step on a dim that does
// not divide, whose bytes each device's own blocks give (harness/plan/uneven_steps.hpp).
Cost step_cost(const Subject& t, const Spec& before, const Spec& after, const Shape& local, StepKind kind,
               const Axes& axes, int dim, int to_dim) {
  if (!step_is_uneven(t.mesh, kind, dim, to_dim, before, after, t.shape)) return cost_of(t, local, kind, axes);
  const std::size_t sent =
      uneven_step_bytes(t.mesh, kind, axes, dim, to_dim, before, after, t.shape, t.element_bytes);
  if (!t.hw) return {double(sent), sent, 1};
  Cost c = cost_of(t, local, kind, axes);  // time: the model's estimate of the largest block
  c.bytes = sent;
  return c;
}

// Every single step from spec s, each passed to visit(kind, axes, dim, to_dim, after). `after`
// is a scratch spec, edited for each move and restored: copy it to keep it. Axes of size 1 never
// appear (they were dropped).
template <class Visit>
void for_each_move(const Subject& t, const Spec& s, const Shape& local, Visit&& visit) {
  const Axes used = s.used_axes();
  Spec w = s;
  Axes axes;
  for (std::size_t d = 0; d < s.rank(); ++d) {
    const Axes& list = s.dims[d];
    for (std::size_t k = 0; k < list.size(); ++k) {  // AllGather the suffix from k
      w.dims[d].resize(k);
      axes.assign(list.begin() + static_cast<long>(k), list.end());
      visit(StepKind::all_gather, axes, int(d), -1, w);
      w.dims[d] = list;
    }
    for (const auto& x : t.mesh.names()) {  // a free slice by an axis nothing uses yet
      const std::size_t n = static_cast<std::size_t>(size_of(t.mesh, x));
      if (n < 2 || contains_axis(used, x) || (local[d] % n != 0 && !t.uneven)) continue;
      w.dims[d].push_back(x);
      axes.assign(1, x);
      visit(StepKind::local_slice, axes, int(d), -1, w);
      w.dims[d].pop_back();
    }
    if (list.empty()) continue;
    const std::string& x = list.back();  // AllToAll: the innermost axis to the end of another dim
    const std::size_t n = static_cast<std::size_t>(size_of(t.mesh, x));
    for (std::size_t j = 0; j < s.rank(); ++j) {
      if (j == d || (local[j] % n != 0 && !t.uneven)) continue;
      w.dims[d].pop_back();
      w.dims[j].push_back(x);
      axes.assign(1, x);
      visit(StepKind::all_to_all, axes, int(d), int(j), w);
      w.dims[j].pop_back();
      w.dims[d].push_back(x);
    }
  }
  if (s.partial.empty()) return;
  // Partial sums: AllReduce any subset, ReduceScatter any ordered run onto a dim. Subsets and
  // runs keep mesh order / every order; there are at most 4 partial axes.
  const Axes& p = s.partial;
  const std::size_t subsets = std::size_t{1} << p.size();
  for (std::size_t mask = 1; mask < subsets; ++mask) {
    Axes pick, rest;
    for (std::size_t i = 0; i < p.size(); ++i) (mask >> i & 1 ? pick : rest).push_back(p[i]);
    w.partial = rest;
    visit(StepKind::all_reduce, pick, -1, -1, w);
    std::sort(pick.begin(), pick.end());
    do {
      const std::size_t n = static_cast<std::size_t>(size_of(t.mesh, pick));
      for (std::size_t d = 0; d < s.rank(); ++d) {
        if (local[d] % n != 0 && !t.uneven) continue;
        w.dims[d].insert(w.dims[d].end(), pick.begin(), pick.end());
        visit(StepKind::reduce_scatter, pick, int(d), -1, w);
        w.dims[d].resize(s.dims[d].size());
      }
    } while (std::next_permutation(pick.begin(), pick.end()));
  }
}

// A compact key for a spec: per dim the mesh axis indices, then the partial ones (sorted).
std::string key_of(const Mesh& mesh, const Spec& s) {
  std::string k;
  for (const auto& d : s.dims) {
    for (const auto& a : d) k += static_cast<char>('a' + axis_of(mesh, a));
    k += '|';
  }
  // Partial sums over a set of axes: the order they are listed in means nothing.
  std::string partial;
  for (const auto& a : s.partial) partial += static_cast<char>('a' + axis_of(mesh, a));
  std::sort(partial.begin(), partial.end());
  return k + '#' + partial;
}

// Dijkstra over the layouts of one tensor from one or more starting layouts (each with a cost
// already paid). States costing more than `bound` bytes are not expanded; with `target`, it stops
// once the target is settled. Settled states keep their cost and how they were reached.
class Layouts {
 public:
  struct Node {
    Spec spec;
    Cost cost;
    std::string prev;  // key of the state before; empty at a start
    Move move;
    bool settled = false;
  };

  Layouts(const Subject& t, const std::vector<std::pair<Spec, Cost>>& starts, double bound,
          const Spec* target = nullptr)
      : mesh_(t.mesh) {
    using Item = std::pair<Cost, std::string>;
    auto later = [](const Item& x, const Item& y) { return y.first < x.first || (x.first == y.first && y.second < x.second); };
    std::priority_queue<Item, std::vector<Item>, decltype(later)> queue(later);
    for (const auto& [spec, c] : starts) {
      const std::string k = key_of(mesh_, spec);
      auto it = nodes_.find(k);
      if (it != nodes_.end() && !(c < it->second.cost)) continue;
      nodes_[k] = Node{spec, c, "", {}, false};
      queue.push({c, k});
    }
    const std::string goal = target ? key_of(mesh_, *target) : "";
    while (!queue.empty()) {
      const auto [c, k] = queue.top();
      queue.pop();
      Node& node = nodes_[k];
      if (node.settled || node.cost < c) continue;
      node.settled = true;
      settled_.push_back(k);
      if (target && k == goal) break;
      const Spec here = node.spec;
      const Shape local = block_shape(t, here);
      for_each_move(t, here, local, [&](StepKind kind, const Axes& axes, int dim, int to_dim, const Spec& after) {
        const Cost next = c + step_cost(t, here, after, local, kind, axes, dim, to_dim);
        if (next.key > bound) return;
        std::string key = key_of(mesh_, after);
        auto it = nodes_.find(key);
        if (it != nodes_.end() && (it->second.settled || !(next < it->second.cost))) return;
        nodes_[key] = Node{after, next, k, Move{kind, axes, dim, to_dim, {}}, false};  // path_to fills in after
        queue.push({next, std::move(key)});
      });
    }
  }

  // Settled states in order of cost.
  const std::vector<std::string>& settled() const { return settled_; }
  const Node* find(const Spec& s) const { return find_key(key_of(mesh_, s)); }
  const Node* find_key(const std::string& key) const {
    auto it = nodes_.find(key);
    return it == nodes_.end() || !it->second.settled ? nullptr : &it->second;
  }
  // The start a settled state was reached from, and the moves from it, in order.
  std::vector<Move> path_to(const Spec& s, Spec* start = nullptr) const {
    std::vector<Move> out;
    std::string k = key_of(mesh_, s);
    for (; !nodes_.at(k).prev.empty(); k = nodes_.at(k).prev) {
      out.push_back(nodes_.at(k).move);
      out.back().after = nodes_.at(k).spec;
    }
    if (start) *start = nodes_.at(k).spec;
    std::reverse(out.begin(), out.end());
    return out;
  }

 private:
  const Mesh& mesh_;
  std::unordered_map<std::string, Node> nodes_;
  std::vector<std::string> settled_;
};

// A candidate: operand layouts to multiply, the product, and its total cost.
struct Candidate {
  Spec a_used, b_used;
  Spec product;
  Cost cost;
  double flops = 0;
};

bool better(const Candidate& x, const Candidate& y) { return x.cost < y.cost; }

std::string reason_for(const Move& m, const std::string& letters) {
  auto dim = [&](int d) { return std::string(1, static_cast<char>(std::toupper(letters[static_cast<std::size_t>(d)]))); };
  switch (m.kind) {
    case StepKind::all_gather: return "gather dim " + dim(m.dim) + " over " + axes_text(m.axes);
    case StepKind::local_slice:
      return "slice dim " + dim(m.dim) + " over " + axes_text(m.axes) + ": this device's part, no messages";
    case StepKind::all_to_all:
      return "move the split over " + axes_text(m.axes) + " from dim " + dim(m.dim) + " to dim " + dim(m.to_dim);
    case StepKind::reduce_scatter:
      return "sum the partial products over " + axes_text(m.axes) + ", each device keeping its slice of dim " +
             dim(m.dim);
    case StepKind::all_reduce: return "sum the partial products over " + axes_text(m.axes) + " on every device";
    case StepKind::all_reduce_max:
    case StepKind::collective_permute:
    case StepKind::contract: break;
  }
  return "";
}

// The plan step of move m on tensor `label` (operand o), which stands at `cur`; cur becomes m.after.
PlanStep step_of(const Subject& t, const Mesh& mesh, const Move& m, Spec& cur, int o, const std::string& label,
                 const std::string& letters) {
  PlanStep s;
  s.kind = m.kind;
  s.operand = o;
  s.tensor = label;
  s.axes = m.axes;
  s.dim = m.dim;
  s.to_dim = m.to_dim;
  s.before = cur;
  s.local_before = local_shape(mesh, cur, t.shape);
  s.global = t.shape;
  s.predicted_bytes = step_cost(t, cur, m.after, s.local_before, m.kind, m.axes, m.dim, m.to_dim).bytes;
  s.reason = reason_for(m, letters);
  cur = m.after;
  s.after = cur;
  s.local_after = local_shape(mesh, cur, t.shape);
  return s;
}

// The cheapest pair of operand layouts (from the operands' searches `ops`) for each product they
// can form, keyed by the product's layout: a pair multiplies when every dim the operands share is
// split the same way in both and no mesh axis splits a free dim of each.
std::map<std::string, Candidate> products_of(const Einsum& eq, const Mesh& mesh, const Subject subject[3],
                                             const Layouts ops[2], double bound, const PlanOptions& options) {
  const std::string letters[3] = {eq.a, eq.b, eq.out};
  // B's layouts by how they split the dims B shares with A: a pair multiplies only if these match.
  const std::string shared = eq.contracted() + eq.batch();
  auto shared_key = [&](int o, const Spec& s) {
    std::string k;
    for (char c : shared) k += axes_text(s.dims[letters[o].find(c)]) + "|";
    return k;
  };
  std::unordered_map<std::string, std::vector<const Layouts::Node*>> b_by_shared;
  for (const auto& k : ops[kB].settled()) {
    const auto* n = ops[kB].find_key(k);
    b_by_shared[shared_key(kB, n->spec)].push_back(n);
  }
  std::map<std::string, Candidate> products;
  for (const auto& ak : ops[kA].settled()) {
    const auto* an = ops[kA].find_key(ak);
    auto match = b_by_shared.find(shared_key(kA, an->spec));
    if (match == b_by_shared.end()) continue;
    const Shape a_block = block_shape(subject[kA], an->spec);
    Axes a_free_axes;
    for (char c : eq.a_free())
      for (const auto& x : an->spec.dims[eq.a.find(c)]) a_free_axes.push_back(x);
    for (const auto* bn : match->second) {
      const Cost before = an->cost + bn->cost;
      if (before.key > bound) break;  // B's layouts come in order of cost
      bool clash = false;
      for (char c : eq.b_free())
        for (const auto& x : bn->spec.dims[eq.b.find(c)]) clash = clash || contains_axis(a_free_axes, x);
      if (clash) continue;
      Spec p = Spec::replicated(eq.out.size());
      for (std::size_t i = 0; i < eq.out.size(); ++i) {
        const char c = eq.out[i];
        p.dims[i] = eq.a.find(c) != std::string::npos ? an->spec.dims[eq.a.find(c)] : bn->spec.dims[eq.b.find(c)];
      }
      for (char c : eq.contracted())
        for (const auto& x : an->spec.dims[eq.a.find(c)]) p.partial.push_back(x);
      Candidate cand{an->spec, bn->spec, p, before,
                     contraction_flops(eq, a_block, block_shape(subject[kB], bn->spec))};
      if (options.time_on) cand.cost.key += compute_seconds(cand.flops, *options.time_on);
      cand.cost.flops = cand.flops;
      const std::string pk = key_of(mesh, p);
      auto at = products.find(pk);
      if (at == products.end() || better(cand, at->second)) products[pk] = cand;
    }
  }
  return products;
}

// How many dims a layout splits, and into how many blocks in all: the tie-breaks of a natural output.
int split_dims(const Spec& s) {
  int n = 0;
  for (const auto& d : s.dims) n += !d.empty();
  return n;
}

// Every complete layout (no partial sums) of the result that a plan costing at most `bound`
// reaches, with the cheapest plan's cost, cheapest first.
std::vector<std::pair<Spec, Cost>> output_costs(const Einsum& eq, const Mesh& mesh, const Operand& a, const Operand& b,
                                                const PlanOptions& options, double bound) {
  const bool uneven = uneven_split(mesh, a.spec, a.shape) || uneven_split(mesh, b.spec, b.shape);
  const Subject subject[3] = {{mesh, a.shape, options.element_bytes, options.time_on, uneven},
                              {mesh, b.shape, options.element_bytes, options.time_on, uneven},
                              {mesh, shape_for(eq.out, eq.sizes(a.shape, b.shape)), options.element_bytes, options.time_on,
                               uneven}};
  const Layouts ops[2] = {Layouts(subject[kA], {{without_unit_axes(mesh, a.spec), Cost{}}}, bound),
                          Layouts(subject[kB], {{without_unit_axes(mesh, b.spec), Cost{}}}, bound)};
  std::vector<std::pair<Spec, Cost>> starts;
  for (const auto& kv : products_of(eq, mesh, subject, ops, bound, options))
    starts.push_back({kv.second.product, kv.second.cost});
  const Layouts finish(subject[kC], starts, bound);
  std::vector<std::pair<Spec, Cost>> out;
  for (const auto& k : finish.settled()) {
    const auto* n = finish.find_key(k);
    if (!n->spec.is_partial()) out.push_back({n->spec, n->cost});
  }
  return out;
}

// No output spec: the result takes its natural layout (natural.hpp), and the plan is the search's
// cheapest to it; `article` is the articles' rules' plan to the same layout.
SearchResult search_natural(const Einsum& eq, const Mesh& mesh, const Operand& a, const Operand& b,
                            const PlanOptions& options) {
  const Plan art = plan_contraction(eq, mesh, a, b, std::nullopt, options);  // checks the inputs
  const Spec natural = natural_output(eq, mesh, a.spec, b.spec, art.out_shape, options.gather_first_on_outer_conflict);
  SearchResult r = search_contraction(eq, mesh, a, b, natural, options);
  r.best.out_given = false;
  for (auto& p : r.alternatives) p.out_given = false;
  r.article_output = art.out_spec;
  return r;
}

}  // namespace

SearchResult search_cheapest_output(const Einsum& eq, const Mesh& mesh, const Operand& a, const Operand& b,
                                    const PlanOptions& options) {
  const SearchResult natural = search_contraction(eq, mesh, a, b, std::nullopt, options);
  double bound = plan_objective(natural.best, options.time_on);
  if (options.time_on) bound *= 1 + 1e-9;
  auto outs = output_costs(eq, mesh, a, b, options, bound);
  const Spec nat = without_unit_axes(mesh, natural.best.out_spec);
  auto ways = [&](const Spec& s) { return size_of(mesh, s.used_axes()); };
  std::stable_sort(outs.begin(), outs.end(), [&](const std::pair<Spec, Cost>& x, const std::pair<Spec, Cost>& y) {
    if (x.second.key != y.second.key) return x.second.key < y.second.key;
    if (split_dims(x.first) != split_dims(y.first)) return split_dims(x.first) > split_dims(y.first);
    if (ways(x.first) != ways(y.first)) return ways(x.first) > ways(y.first);
    if (x.second.collectives != y.second.collectives) return x.second.collectives < y.second.collectives;
    if ((x.first == nat) != (y.first == nat)) return x.first == nat;
    return key_of(mesh, x.first) < key_of(mesh, y.first);
  });
  // The natural output is within the bound, so the list is never empty.
  if (outs.empty() || outs.front().first == nat) {
    SearchResult r = natural;
    r.natural = natural.best;
    for (const auto& o : outs) r.outputs.push_back({o.first, o.second.bytes});
    return r;
  }
  const Spec chosen = outs.front().first;
  SearchResult r = search_contraction(eq, mesh, a, b, chosen, options);
  r.best.out_given = false;
  for (auto& p : r.alternatives) p.out_given = false;
  r.natural = natural.best;
  const Operand c{options.result_name, chosen, natural.best.out_shape};
  for (const auto& s : search_reshard(mesh, c, natural.best.out_spec, options)) r.back_to_natural_bytes += s.predicted_bytes;
  for (const auto& o : outs) r.outputs.push_back({o.first, o.second.bytes});
  return r;
}

std::vector<PlanStep> search_reshard(const Mesh& mesh, const Operand& t, const Spec& target,
                                     const PlanOptions& options) {
  t.spec.validate(mesh, t.shape, t.name);
  target.validate(mesh, t.shape, t.name);
  const Subject subject{mesh, t.shape, options.element_bytes, options.time_on,
                       uneven_split(mesh, t.spec, t.shape) || uneven_split(mesh, target, t.shape)};
  const Spec from = without_unit_axes(mesh, t.spec), to = without_unit_axes(mesh, target);
  const Layouts reach(subject, {{from, Cost{}}}, std::numeric_limits<double>::infinity(), &to);
  if (!reach.find(to))
    throw Error(ErrorKind::unsupported, "no collectives take " + t.name + " from " + t.spec.text() + " to " +
                                            target.text());
  std::string letters;
  for (std::size_t d = 0; d < t.shape.size(); ++d) letters += static_cast<char>('a' + d);
  std::vector<PlanStep> steps;
  Spec cur = from;
  for (const auto& m : reach.path_to(to)) steps.push_back(step_of(subject, mesh, m, cur, kC, t.name, letters));
  return steps;
}


std::vector<Reached> reshard_costs(const Mesh& mesh, const Operand& t, const PlanOptions& options) {
  const Subject subject{mesh, t.shape, options.element_bytes, options.time_on, uneven_split(mesh, t.spec, t.shape)};
  const Layouts reach(subject, {{without_unit_axes(mesh, t.spec), Cost{}}}, std::numeric_limits<double>::infinity());
  std::vector<Reached> out;
  for (const auto& k : reach.settled()) {
    const auto* n = reach.find_key(k);
    if (!n->spec.is_partial()) out.push_back({n->spec, n->cost.bytes});
  }
  return out;
}

std::vector<Reached> contraction_costs(const Einsum& eq, const Mesh& mesh, const Operand& a, const Operand& b,
                                       const PlanOptions& options) {
  std::vector<Reached> out;
  for (const auto& o : output_costs(eq, mesh, a, b, options, std::numeric_limits<double>::infinity()))
    out.push_back({o.first, o.second.bytes});
  return out;
}

double plan_objective(const Plan& plan, const Hardware* hw) {
  if (!hw) return double(plan.predicted_bytes_per_device());
  double seconds = compute_seconds(plan.flops_per_device(), *hw);
  const Subject t[3] = {{plan.mesh, plan.a.shape, plan.element_bytes, hw},
                        {plan.mesh, plan.b.shape, plan.element_bytes, hw},
                        {plan.mesh, plan.out_shape, plan.element_bytes, hw}};
  for (const auto& s : plan.steps) {
    if (!s.communicates() || plan.mesh.axes_size(s.axes) <= 1) continue;
    seconds += step_cost(t[s.operand], s.before, s.after, local_shape(plan.mesh, s.before, t[s.operand].shape), s.kind,
                         s.axes, s.dim, s.to_dim)
                   .key;
  }
  return seconds;
}

SearchResult search_contraction(const Einsum& eq, const Mesh& mesh, const Operand& a, const Operand& b,
                                const std::optional<Spec>& out, const PlanOptions& options) {
  // Every placement over every axis is tried: 6 axes take about 2 s, 7 about 90 s and 600 MB.
  int split_axes = 0;
  for (int size : mesh.sizes()) split_axes += size > 1;
  if (split_axes > 6)
    throw Error(ErrorKind::unsupported, "mesh " + mesh.text() + " has " + std::to_string(split_axes) +
                                            " axes of size 2 or more; the planner's search takes at most 6 (merge some axes)");
  if (!out) return search_natural(eq, mesh, a, b, options);
  SearchResult r;
  // The articles' plan checks every input (and says what is wrong).
  // Some partial-sum outputs it cannot make: then the search starts from its plan for the natural
  // result, with no bound.
  Plan base;
  double bound = 0;
  try {
    r.article = plan_contraction(eq, mesh, a, b, out, options);
    base = r.article;
    bound = plan_objective(r.article, options.time_on);
    // Modeled seconds summed in another order may differ in the last bits: keep plans that tie.
    if (options.time_on) bound *= 1 + 1e-9;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::unsupported || !out) throw;
    r.article_refusal = e.what();
    base = plan_contraction(eq, mesh, a, b, std::nullopt, options);
    base.out_spec = *out;
    base.out_given = true;
    bound = std::numeric_limits<double>::infinity();
  }
  const Plan& art = base;
  const Spec target = without_unit_axes(mesh, art.out_spec);
  const std::string letters[3] = {eq.a, eq.b, eq.out};
  const bool uneven = uneven_split(mesh, a.spec, a.shape) || uneven_split(mesh, b.spec, b.shape) ||
                     uneven_split(mesh, art.out_spec, art.out_shape);
  const Subject subject[3] = {{mesh, a.shape, options.element_bytes, options.time_on, uneven},
                              {mesh, b.shape, options.element_bytes, options.time_on, uneven},
                              {mesh, art.out_shape, options.element_bytes, options.time_on, uneven}};
  // Every plan the search keeps must beat or match the articles' (a valid plan): a bound.
  const Layouts ops[2] = {Layouts(subject[kA], {{without_unit_axes(mesh, a.spec), Cost{}}}, bound),
                          Layouts(subject[kB], {{without_unit_axes(mesh, b.spec), Cost{}}}, bound)};
  r.layouts_explored = ops[0].settled().size() + ops[1].settled().size();
  const std::map<std::string, Candidate> products = products_of(eq, mesh, subject, ops, bound, options);
  if (products.empty())
    throw Error(ErrorKind::unsupported, "no plan takes " + a.spec.text() + " x " + b.spec.text() + " to " +
                                            target.text() + " for " + options.result_name);
  // One search over the result's layouts from every product at once, each starting with what its
  // operands cost: the target's cost is then the cheapest plan's.
  std::vector<std::pair<Spec, Cost>> starts;
  for (const auto& kv : products) starts.push_back({kv.second.product, kv.second.cost});
  const Layouts finish(subject[kC], starts, bound, &target);
  r.layouts_explored += finish.settled().size();
  const auto* done = finish.find(target);
  if (!done && r.article_refusal.empty()) {  // nothing cheaper than the articles' plan: keep it
    r.best = r.article;
    return r;
  }
  if (!done)
    throw Error(ErrorKind::unsupported, "no plan takes " + a.spec.text() + " x " + b.spec.text() + " to " +
                                            target.text() + " for " + options.result_name);
  Spec chosen_product;
  const std::vector<Move> tail = finish.path_to(target, &chosen_product);
  const Candidate chosen = products.at(key_of(mesh, chosen_product));

  auto build = [&](const Candidate& c, const std::vector<Move>& result_moves) {
    Plan plan = art;  // inputs, names, shapes, output as the articles' plan has them
    plan.steps.clear();
    Spec cur[3] = {without_unit_axes(mesh, a.spec), without_unit_axes(mesh, b.spec), c.product};
    const std::string label[3] = {a.name, b.name, options.result_name};
    auto push = [&](int o, const Move& m) {
      plan.steps.push_back(step_of(subject[o], mesh, m, cur[o], o, label[o], letters[o]));
    };
    for (const auto& m : ops[kA].path_to(c.a_used)) push(kA, m);
    for (const auto& m : ops[kB].path_to(c.b_used)) push(kB, m);
    plan.a_used = cur[kA];
    plan.b_used = cur[kB];
    plan.product = c.product;
    PlanStep s;
    s.kind = StepKind::contract;
    s.operand = kC;
    s.tensor = label[kC];
    s.before = s.after = c.product;
    s.local_before = s.local_after = local_shape(mesh, c.product, art.out_shape);
    s.global = art.out_shape;
    s.flops = c.flops;
    s.reason = c.product.is_partial() ? "local product; each is a partial sum over " + axes_text(c.product.partial)
                                      : "local product; every term of each sum is on this device";
    plan.steps.push_back(std::move(s));
    for (const auto& m : result_moves) push(kC, m);
    return plan;
  };
  r.best = build(chosen, tail);
  // Ties go to the articles' plan.
  const Cost art_cost{plan_objective(art, options.time_on), art.predicted_bytes_per_device(),
                      static_cast<int>(art.collectives().size())};
  const bool tie = std::abs(art_cost.key - done->cost.key) <= 1e-9 * std::max(1.0, std::abs(art_cost.key)) &&
                   art_cost.bytes == done->cost.bytes && art_cost.collectives == done->cost.collectives;
  if (r.article_refusal.empty() && tie && art.flops_per_device() <= chosen.flops) r.best = art;

  // The best rejected plans: through the other products whose operands cost least, each finished
  // by a search of its own (a few small searches, bounded like the first).
  std::vector<const Candidate*> others;
  for (const auto& kv : products)
    if (key_of(mesh, kv.second.product) != key_of(mesh, chosen_product)) others.push_back(&kv.second);
  std::sort(others.begin(), others.end(), [](const Candidate* x, const Candidate* y) { return better(*x, *y); });
  std::vector<Plan> alt;
  for (std::size_t i = 0; i < others.size() && i < 8; ++i) {
    const Layouts own(subject[kC], {{others[i]->product, others[i]->cost}}, bound, &target);
    if (own.find(target)) alt.push_back(build(*others[i], own.path_to(target)));
  }
  const std::string art_summary = r.article_refusal.empty() ? plan_summary(art) : "";
  std::stable_sort(alt.begin(), alt.end(), [](const Plan& x, const Plan& y) {
    return x.predicted_bytes_per_device() < y.predicted_bytes_per_device();
  });
  for (auto& p : alt)
    if (r.alternatives.size() < 4 && plan_summary(p) != art_summary && plan_summary(p) != plan_summary(r.best))
      r.alternatives.push_back(std::move(p));
  return r;
}

}  // namespace shardlab
