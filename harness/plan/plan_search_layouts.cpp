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

// What the moves of one search cost, from layouts in axis numbers. Steps that need the uneven
// forms go through step_cost with Specs; the others are priced from the block and the axis sizes,
// with predicted_bytes_sent's answers kept (an AllReduce's asks every member of its group).
class Pricer {
 public:
  Pricer(const Subject& t, const AxisNumbers& axes) : t_(t), axes_(axes) {}
  int size(int axis) const { return axes_.size(axis); }
  int size(const AxisList& list) const {
    int n = 1;
    for (std::uint8_t a : list) n *= size(a);
    return n;
  }
  Cost operator()(const Lay& before, const Lay& after, const Shape& local, StepKind kind, const AxisList& axes,
                  int dim, int to_dim) {
    if (t_.uneven)
      return step_cost(t_, axes_.spec_of(before), axes_.spec_of(after), local, kind, axes_.names_of(axes), dim, to_dim);
    if (kind == StepKind::local_slice) return {};
    sizes_.clear();
    int p = 1;
    for (std::uint8_t a : axes) {
      sizes_.push_back(size(a));
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
  const AxisNumbers& axes_;
  std::vector<int> sizes_;
  std::map<std::tuple<int, int, std::size_t>, std::size_t> sent_;
};

// Every single step from layout s, each passed to visit(kind, axes, dim, to_dim, after), in the
// order plan_search.hpp's ties depend on. `after` is a scratch layout, edited for each move and
// restored: copy it to keep it. Axes of size 1 never appear (they are not numbered).
template <class Visit>
void for_each_move(const Subject& t, const AxisNumbers& numbers, const Lay& s, const Shape& local, Lay& w,
                   Visit&& visit) {
  const int axes_count = numbers.count();
  std::uint32_t used = s.partial.mask();
  for (const auto& d : s.dims) used |= d.mask();
  w = s;
  AxisList axes;
  for (std::size_t d = 0; d < s.dims.size(); ++d) {
    const AxisList& list = s.dims[d];
    for (std::size_t k = 0; k < list.size(); ++k) {  // AllGather the suffix from k
      w.dims[d].resize(k);
      axes.clear();
      for (std::size_t i = k; i < list.size(); ++i) axes.push_back(list.at[i]);
      visit(StepKind::all_gather, axes, int(d), -1, w);
      w.dims[d] = list;
    }
    for (int x = 0; x < axes_count; ++x) {  // a free slice by an axis nothing uses yet
      const std::size_t n = static_cast<std::size_t>(numbers.size(x));
      if ((used >> x & 1) || (local[d] % n != 0 && !t.uneven)) continue;
      w.dims[d].push_back(x);
      axes.clear();
      axes.push_back(x);
      visit(StepKind::local_slice, axes, int(d), -1, w);
      w.dims[d].pop_back();
    }
    if (list.empty()) continue;
    const int x = list.back();  // AllToAll: the innermost axis to the end of another dim
    const std::size_t n = static_cast<std::size_t>(numbers.size(x));
    for (std::size_t j = 0; j < s.dims.size(); ++j) {
      if (j == d || (local[j] % n != 0 && !t.uneven)) continue;
      w.dims[d].pop_back();
      w.dims[j].push_back(x);
      axes.clear();
      axes.push_back(x);
      visit(StepKind::all_to_all, axes, int(d), int(j), w);
      w.dims[j].pop_back();
      w.dims[d].push_back(x);
    }
  }
  if (s.partial.empty()) return;
  // Partial sums: AllReduce any subset, ReduceScatter any ordered run onto a dim. Subsets keep
  // the listed order; runs take every order, from the axes' names sorted.
  const AxisList& p = s.partial;
  auto by_name = [&](std::uint8_t x, std::uint8_t y) { return numbers.name(x) < numbers.name(y); };
  const std::size_t subsets = std::size_t{1} << p.size();
  AxisList pick;
  for (std::size_t mask = 1; mask < subsets; ++mask) {
    pick.clear();
    w.partial.clear();
    for (std::size_t i = 0; i < p.size(); ++i) (mask >> i & 1 ? pick : w.partial).push_back(p.at[i]);
    visit(StepKind::all_reduce, pick, -1, -1, w);
    std::sort(pick.begin(), pick.end(), by_name);
    do {
      int n = 1;
      for (std::uint8_t a : pick) n *= numbers.size(a);
      for (std::size_t d = 0; d < s.dims.size(); ++d) {
        if (local[d] % static_cast<std::size_t>(n) != 0 && !t.uneven) continue;
        for (std::uint8_t a : pick) w.dims[d].push_back(a);
        visit(StepKind::reduce_scatter, pick, int(d), -1, w);
        w.dims[d].resize(s.dims[d].size());
      }
    } while (std::next_permutation(pick.begin(), pick.end(), by_name));
  }
}

}  // namespace

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


Shape block_shape(const Subject& t, const AxisNumbers& axes, const Lay& l) {
  Shape out = t.shape;
  for (std::size_t d = 0; d < l.dims.size() && d < out.size(); ++d) {
    std::size_t n = 1;
    for (std::uint8_t a : l.dims[d]) n *= static_cast<std::size_t>(axes.size(a));
    if (out[d] % n != 0) return local_shape(t.mesh, axes.spec_of(l), t.shape);
    out[d] /= n;
  }
  return l.dims.size() == out.size() ? out : local_shape(t.mesh, axes.spec_of(l), t.shape);
}

Layouts::Layouts(const Subject& t, const std::vector<std::pair<Spec, Cost>>& starts, double bound,
                 const Spec* target)
    : axes_(t.mesh) {
  std::vector<std::pair<Code, Cost>> codes;
  for (const auto& [spec, c] : starts) codes.push_back({axes_.code_of(spec), c});
  const Code goal = target ? axes_.key_of(*target) : Code{};
  run(t, codes, bound, target ? &goal : nullptr);
}

Layouts::Layouts(const Subject& t, const std::vector<std::pair<Code, Cost>>& starts, double bound,
                 const Code* target)
    : axes_(t.mesh) {
  run(t, starts, bound, target);
}

void Layouts::run(const Subject& t, const std::vector<std::pair<Code, Cost>>& starts, double bound,
                  const Code* target) {
  // Equal costs go to the smaller key.
  using Item = std::pair<Cost, int>;
  auto later = [this](const Item& x, const Item& y) {
    return y.first < x.first || (x.first == y.first && node(y.second).key < node(x.second).key);
  };
  std::priority_queue<Item, std::vector<Item>, decltype(later)> queue(later);
  index_.reserve(4096);
  nodes_.reserve(4096);
  // The node of `key`, made if new.
  auto node_of = [&](const Code& key) {
    auto [it, made] = index_.try_emplace(key, static_cast<int>(nodes_.size()));
    if (made) nodes_.emplace_back().key = key;
    return it->second;
  };
  for (const auto& [code, c] : starts) {
    const Code k = key_of_code(code);
    auto it = index_.find(k);
    if (it != index_.end() && !(c < node(it->second).cost)) continue;
    const int i = node_of(k);
    Node& n = nodes_[static_cast<std::size_t>(i)];
    n.code = code;
    n.cost = c;
    n.prev = -1;
    queue.push({c, i});
  }
  Pricer price(t, axes_);
  Lay here, work;
  while (!queue.empty()) {
    const auto [c, i] = queue.top();
    queue.pop();
    Node& node = nodes_[static_cast<std::size_t>(i)];
    if (node.settled || node.cost < c) continue;
    node.settled = true;
    settled_.push_back(i);
    if (target && node.key == *target) break;
    decode(node.code, here);
    const Shape local = block_shape(t, axes_, here);
    for_each_move(t, axes_, here, local, work,
                  [&](StepKind kind, const AxisList& axes, int dim, int to_dim, const Lay& after) {
                    const Cost next = c + price(here, after, local, kind, axes, dim, to_dim);
                    if (next.key > bound) return;
                    const Code code = encode(after);
                    const Code key = after.partial.size() > 1 ? encode(after, true) : code;
                    auto it = index_.find(key);
                    if (it != index_.end()) {
                      const Node& old = nodes_[static_cast<std::size_t>(it->second)];
                      if (old.settled || !(next < old.cost)) return;
                    }
                    const int j = it != index_.end() ? it->second : node_of(key);
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

std::vector<Move> Layouts::path_to(const Code& key, Code* start) const {
  std::vector<Move> out;
  int i = index_.at(key);
  for (; node(i).prev >= 0; i = node(i).prev) {
    const Node& n = node(i);
    Move m;
    m.kind = n.kind;
    m.axes = axes_.names_of(n.axes);
    m.dim = n.dim;
    m.to_dim = n.to_dim;
    m.after = spec_of(n.code);
    out.push_back(std::move(m));
  }
  if (start) *start = node(i).code;
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace shardlab::search_detail
