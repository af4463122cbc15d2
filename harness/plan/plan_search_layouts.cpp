#include "harness/plan/plan_search_layouts.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <tuple>

#include "collectives/predict.hpp"
#include "core/layout.hpp"
#include "harness/cost/topology.hpp"
#include "harness/plan/operands.hpp"
#include "harness/plan/uneven_steps.hpp"

namespace shardlab::search_detail {

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

bool uneven_split(const Mesh& mesh, const Spec& s, const Shape& shape) {
  return mesh.uneven() != Uneven::none && s.rank() == shape.size() && !is_even(mesh, s, shape);
}

// The search only makes splits that divide; anything else goes through local_shape's checks.
Shape block_shape(const Subject& t, const Spec& s) {
  Shape out = t.shape;
  for (std::size_t d = 0; d < s.rank() && d < out.size(); ++d) {
    const std::size_t n = static_cast<std::size_t>(size_of(t.mesh, s.dims[d]));
    if (n == 0 || out[d] % n != 0) return local_shape(t.mesh, s, t.shape);
    out[d] /= n;
  }
  return s.rank() == out.size() ? out : local_shape(t.mesh, s, t.shape);
}

namespace {

// The cost of a step of `kind` over axes of `sizes` from a layout whose block is `local`; `sent`
// is what one device sends (predicted_bytes_sent).
Cost priced(const Subject& t, const Shape& local, StepKind kind, const std::vector<int>& sizes, std::size_t sent) {
  if (!t.hw) return {double(sent), sent, 1};
  // The model's n is the whole tensor of the collective: the gathered result of an AllGather,
  // the input of the others (as harness/models/step_cost.cpp prices the FFN's steps).
  int p = 1;
  for (int s : sizes) p *= s;
  const std::size_t in = bytes_of(local, t.element_bytes);
  const double whole = kind == StepKind::all_gather ? double(in) * p : double(in);
  return {topology_seconds(step_kind_name(kind), sizes, whole, *t.hw), sent, 1};
}

Cost cost_of(const Subject& t, const Shape& local, StepKind kind, const Axes& axes) {
  if (kind == StepKind::local_slice) return {};
  std::vector<int> sizes;
  for (const auto& a : axes) sizes.push_back(size_of(t.mesh, a));
  int p = 1;
  for (int s : sizes) p *= s;
  const std::size_t sent =
      predicted_bytes_sent(step_kind_name(kind), p, bytes_of(local, t.element_bytes), t.element_bytes);
  return priced(t, local, kind, sizes, sent);
}

char letter_of(int axis) { return static_cast<char>('a' + axis); }
int axis_of_letter(char c) { return c - 'a'; }

std::string code_of(const Mesh& mesh, const Spec& s) {
  Lay l;
  for (const auto& d : s.dims) {
    l.dims.emplace_back();
    for (const auto& a : d) l.dims.back() += letter_of(axis_of(mesh, a));
  }
  for (const auto& a : s.partial) l.partial += letter_of(axis_of(mesh, a));
  std::string code;
  encode(l, code);
  return code;
}

// What the moves of one search cost, from layouts in letters. Steps that need the uneven forms
// go through step_cost with Specs; the others are priced from the block and the axis sizes, with
// predicted_bytes_sent's answers kept (an AllReduce's asks every member of its group).
class Pricer {
 public:
  Pricer(const Subject& t, std::function<Spec(const Lay&)> spec) : t_(t), spec_(std::move(spec)) {
    for (int s : t.mesh.sizes()) size_.push_back(s);
  }
  int size(char letter) const { return size_[static_cast<std::size_t>(axis_of_letter(letter))]; }
  int size(const std::string& letters) const {
    int n = 1;
    for (char c : letters) n *= size(c);
    return n;
  }
  Shape block(const Lay& l) const {
    Shape out = t_.shape;
    for (std::size_t d = 0; d < l.dims.size() && d < out.size(); ++d) {
      const std::size_t n = static_cast<std::size_t>(size(l.dims[d]));
      if (n == 0 || out[d] % n != 0) return local_shape(t_.mesh, spec_(l), t_.shape);
      out[d] /= n;
    }
    return l.dims.size() == out.size() ? out : local_shape(t_.mesh, spec_(l), t_.shape);
  }
  Cost operator()(const Lay& before, const Lay& after, const Shape& local, StepKind kind, const std::string& axes,
                  int dim, int to_dim) {
    if (t_.uneven) {
      Axes names;
      for (char c : axes) names.push_back(t_.mesh.names()[static_cast<std::size_t>(axis_of_letter(c))]);
      return step_cost(t_, spec_(before), spec_(after), local, kind, names, dim, to_dim);
    }
    if (kind == StepKind::local_slice) return {};
    sizes_.clear();
    int p = 1;
    for (char c : axes) {
      sizes_.push_back(size(c));
      p *= sizes_.back();
    }
    const std::size_t in = bytes_of(local, t_.element_bytes);
    const auto k = std::make_tuple(static_cast<int>(kind), p, in);
    auto it = sent_.find(k);
    if (it == sent_.end())
      it = sent_.emplace(k, predicted_bytes_sent(step_kind_name(kind), p, in, t_.element_bytes)).first;
    return priced(t_, local, kind, sizes_, it->second);
  }

 private:
  const Subject& t_;
  std::function<Spec(const Lay&)> spec_;
  std::vector<int> size_;
  std::vector<int> sizes_;
  std::map<std::tuple<int, int, std::size_t>, std::size_t> sent_;
};

// Every single step from layout s, each passed to visit(kind, axes, dim, to_dim, after), in the
// order plan_search.hpp's ties depend on. `after` is a scratch layout, edited for each move and
// restored: copy it to keep it. Axes of size 1 never appear (they were dropped).
template <class Visit>
void for_each_move(const Subject& t, const Pricer& price, const Lay& s, const Shape& local, Lay& w, Visit&& visit) {
  const std::size_t axes_count = t.mesh.names().size();
  std::vector<char> used(axes_count, 0);
  for (const auto& d : s.dims)
    for (char c : d) used[static_cast<std::size_t>(axis_of_letter(c))] = 1;
  for (char c : s.partial) used[static_cast<std::size_t>(axis_of_letter(c))] = 1;
  w = s;
  std::string axes;
  for (std::size_t d = 0; d < s.dims.size(); ++d) {
    const std::string& list = s.dims[d];
    for (std::size_t k = 0; k < list.size(); ++k) {  // AllGather the suffix from k
      w.dims[d].resize(k);
      axes.assign(list, k, std::string::npos);
      visit(StepKind::all_gather, axes, int(d), -1, w);
      w.dims[d] = list;
    }
    for (std::size_t i = 0; i < axes_count; ++i) {  // a free slice by an axis nothing uses yet
      const char x = letter_of(int(i));
      const std::size_t n = static_cast<std::size_t>(price.size(x));
      if (n < 2 || used[i] || (local[d] % n != 0 && !t.uneven)) continue;
      w.dims[d].push_back(x);
      axes.assign(1, x);
      visit(StepKind::local_slice, axes, int(d), -1, w);
      w.dims[d].pop_back();
    }
    if (list.empty()) continue;
    const char x = list.back();  // AllToAll: the innermost axis to the end of another dim
    const std::size_t n = static_cast<std::size_t>(price.size(x));
    for (std::size_t j = 0; j < s.dims.size(); ++j) {
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
  // Partial sums: AllReduce any subset, ReduceScatter any ordered run onto a dim. Subsets keep
  // the listed order; runs take every order, from the axes' names sorted.
  const std::string& p = s.partial;
  const auto& names = t.mesh.names();
  auto by_name = [&](char x, char y) {
    return names[static_cast<std::size_t>(axis_of_letter(x))] < names[static_cast<std::size_t>(axis_of_letter(y))];
  };
  const std::size_t subsets = std::size_t{1} << p.size();
  for (std::size_t mask = 1; mask < subsets; ++mask) {
    std::string pick, rest;
    for (std::size_t i = 0; i < p.size(); ++i) (mask >> i & 1 ? pick : rest).push_back(p[i]);
    w.partial = rest;
    visit(StepKind::all_reduce, pick, -1, -1, w);
    std::sort(pick.begin(), pick.end(), by_name);
    do {
      const std::size_t n = static_cast<std::size_t>(price.size(pick));
      for (std::size_t d = 0; d < s.dims.size(); ++d) {
        if (local[d] % n != 0 && !t.uneven) continue;
        w.dims[d] += pick;
        visit(StepKind::reduce_scatter, pick, int(d), -1, w);
        w.dims[d].resize(s.dims[d].size());
      }
    } while (std::next_permutation(pick.begin(), pick.end(), by_name));
  }
}

}  // namespace

void encode(const Lay& l, std::string& code) {
  code.clear();
  for (const auto& d : l.dims) {
    code += d;
    code += '|';
  }
  code += '#';
  code += l.partial;
}

std::string key_of_code(const std::string& code) {
  std::string k = code;
  const std::size_t hash = k.find('#');
  if (k.size() - hash > 2) std::sort(k.begin() + static_cast<long>(hash) + 1, k.end());
  return k;
}

void decode(const std::string& code, Lay& l) {
  l.dims.clear();
  l.partial.clear();
  std::size_t i = 0;
  for (std::size_t bar; (bar = code.find('|', i)) != std::string::npos && code[i] != '#'; i = bar + 1)
    l.dims.emplace_back(code, i, bar - i);
  l.partial.assign(code, i + 1, std::string::npos);
}

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

std::string key_of(const Mesh& mesh, const Spec& s) { return key_of_code(code_of(mesh, s)); }

Spec Layouts::spec_of(const std::string& code) const {
  Lay l;
  decode(code, l);
  const auto& names = mesh_.names();
  Spec s = Spec::replicated(l.dims.size());
  for (std::size_t d = 0; d < l.dims.size(); ++d)
    for (char c : l.dims[d]) s.dims[d].push_back(names[static_cast<std::size_t>(axis_of_letter(c))]);
  for (char c : l.partial) s.partial.push_back(names[static_cast<std::size_t>(axis_of_letter(c))]);
  return s;
}

Layouts::Layouts(const Subject& t, const std::vector<std::pair<Spec, Cost>>& starts, double bound,
                 const Spec* target)
    : mesh_(t.mesh) {
  // Equal costs go to the smaller key, as they did when the queue held the keys themselves.
  using Item = std::pair<Cost, int>;
  auto later = [this](const Item& x, const Item& y) {
    return y.first < x.first || (x.first == y.first && nodes_[static_cast<std::size_t>(y.second)].key <
                                                           nodes_[static_cast<std::size_t>(x.second)].key);
  };
  std::priority_queue<Item, std::vector<Item>, decltype(later)> queue(later);
  // The node of `key`, made if new.
  auto node_of = [&](std::string&& key) {
    auto [it, made] = index_.try_emplace(key, static_cast<int>(nodes_.size()));
    if (made) {
      nodes_.emplace_back();
      nodes_.back().key = std::move(key);
    }
    return it->second;
  };
  for (const auto& [spec, c] : starts) {
    std::string code = code_of(mesh_, spec);
    std::string k = key_of_code(code);
    auto it = index_.find(k);
    if (it != index_.end() && !(c < nodes_[static_cast<std::size_t>(it->second)].cost)) continue;
    const int i = node_of(std::move(k));
    Node& n = nodes_[static_cast<std::size_t>(i)];
    n.code = std::move(code);
    n.cost = c;
    n.prev = -1;
    queue.push({c, i});
  }
  const std::string goal = target ? key_of(mesh_, *target) : "";
  Pricer price(t, [&](const Lay& l) {
    std::string code;
    encode(l, code);
    return spec_of(code);
  });
  Lay here, work;
  std::string code, key;
  index_.reserve(4096);
  nodes_.reserve(4096);
  while (!queue.empty()) {
    const auto [c, i] = queue.top();
    queue.pop();
    Node& node = nodes_[static_cast<std::size_t>(i)];
    if (node.settled || node.cost < c) continue;
    node.settled = true;
    if (!target) node.spec = spec_of(node.code);
    settled_.push_back(node.key);
    if (target && node.key == goal) break;
    decode(node.code, here);
    const Shape local = price.block(here);
    for_each_move(t, price, here, local, work,
                  [&](StepKind kind, const std::string& axes, int dim, int to_dim, const Lay& after) {
                    const Cost next = c + price(here, after, local, kind, axes, dim, to_dim);
                    if (next.key > bound) return;
                    encode(after, code);
                    key.assign(code);
                    if (after.partial.size() > 1) key = key_of_code(code);
                    auto it = index_.find(key);
                    if (it != index_.end()) {
                      const Node& old = nodes_[static_cast<std::size_t>(it->second)];
                      if (old.settled || !(next < old.cost)) return;
                    }
                    const int j = it != index_.end() ? it->second : node_of(std::string(key));
                    Node& n = nodes_[static_cast<std::size_t>(j)];  // node_of may have moved nodes_
                    n.code = code;
                    n.cost = next;
                    n.prev = i;
                    n.kind = kind;
                    n.axes = axes;
                    n.dim = dim;
                    n.to_dim = to_dim;
                    queue.push({next, j});
                  });
  }
}

std::vector<Move> Layouts::path_to(const Spec& s, Spec* start) const {
  std::vector<Move> out;
  const auto& names = mesh_.names();
  int i = index_.at(key_of(mesh_, s));
  for (; nodes_[static_cast<std::size_t>(i)].prev >= 0; i = nodes_[static_cast<std::size_t>(i)].prev) {
    const Node& n = nodes_[static_cast<std::size_t>(i)];
    Move m;
    m.kind = n.kind;
    for (char c : n.axes) m.axes.push_back(names[static_cast<std::size_t>(axis_of_letter(c))]);
    m.dim = n.dim;
    m.to_dim = n.to_dim;
    m.after = spec_of(n.code);
    out.push_back(std::move(m));
  }
  if (start) *start = spec_of(nodes_[static_cast<std::size_t>(i)].code);
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace shardlab::search_detail
