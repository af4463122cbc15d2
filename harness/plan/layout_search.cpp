#include "harness/plan/layout_search.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "collectives/predict.hpp"
#include "core/einsum.hpp"
#include "core/layout.hpp"
#include "core/text.hpp"
#include "harness/plan/plan_search.hpp"

namespace shardlab {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Mesh axes i.. of `axes` placed on the dims of s, each on none or at any position of a dim's list.
void place(const Mesh& mesh, const Shape& shape, const std::vector<std::size_t>& whole,
           const std::vector<std::string>& axes, std::size_t i, Spec& s, std::vector<Spec>& out) {
  if (i == axes.size()) {
    for (std::size_t d = 0; d < shape.size(); ++d)
      if (shape[d] % static_cast<std::size_t>(mesh.axes_size(s.dims[d])) != 0 && mesh.uneven() == Uneven::none) return;
    out.push_back(s);
    return;
  }
  place(mesh, shape, whole, axes, i + 1, s, out);
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (std::find(whole.begin(), whole.end(), d) != whole.end()) continue;
    auto& list = s.dims[d];
    for (std::size_t at = 0; at <= list.size(); ++at) {
      list.insert(list.begin() + static_cast<long>(at), axes[i]);
      place(mesh, shape, whole, axes, i + 1, s, out);
      list.erase(list.begin() + static_cast<long>(at));
    }
  }
}

// Prices one op from its operands' and output's specs, as plan_tensor_program plans it alone, in
// elements sent per device (element size 1). Each search's answers are kept: one reshard search
// from a spec prices every target, one contraction search every output.
class Pricer {
 public:
  Pricer(const TensorProgram& p, const Mesh& mesh) : p_(p), mesh_(mesh) {}

  double op(const ProgramOp& op, const std::vector<Spec>& in, const Spec& out) {
    const std::string& od = p_.dims.at(op.out);
    switch (op.kind) {
      case OpKind::einsum: return contraction(op, in[0], in[1], out);
      case OpKind::unary:
      case OpKind::softmax:
      case OpKind::rename: return reshard(op.in[0], p_.shape(op.in[0]), in[0], out);
      case OpKind::broadcast:
        return reshard(op.in[0], p_.shape(op.in[0]), in[0], restricted(out, od, p_.dims.at(op.in[0])));
      case OpKind::split: return reshard(op.in[0], p_.shape(op.in[0]), in[0], widened(out, od, p_.dims.at(op.in[0])));
      case OpKind::concat:
      case OpKind::binary: {
        double sum = 0;
        for (std::size_t k = 0; k < op.in.size(); ++k)
          sum += reshard(op.in[k], p_.shape(op.in[k]), in[k], restricted(out, od, p_.dims.at(op.in[k])));
        return sum;
      }
      case OpKind::reduce: {
        const std::string& id = p_.dims.at(op.in[0]);
        if (op.name != "max") return reshard(op.out, p_.shape(op.out), reduced(in[0], id, op.over, true), out);
        const Spec computed = reduced(in[0], id, op.over, false);
        std::vector<std::string> axes;
        for (std::size_t d = 0; d < id.size(); ++d)
          if (op.over.find(id[d]) != std::string::npos) axes.insert(axes.end(), in[0].dims[d].begin(), in[0].dims[d].end());
        double max = 0;
        if (mesh_.axes_size(axes) > 1)
          max = double(predicted_bytes_sent("all_reduce_max", mesh_.axes_size(axes),
                                            element_count(local_shape(mesh_, computed, p_.shape(op.out))), 1));
        return max + reshard(op.out, p_.shape(op.out), computed, out);
      }
    }
    return kInf;
  }

 private:
  double reshard(const std::string& t, const Shape& shape, const Spec& from, const Spec& to) {
    if (from == to) return 0;
    auto& known = reshards_[t + " " + from.text()];
    if (known.empty())
      for (const auto& r : reshard_costs(mesh_, {t, from, shape}, {false, t, 1})) known[r.spec.text()] = double(r.bytes);
    auto it = known.find(to.text());
    return it == known.end() ? kInf : it->second;
  }
  double contraction(const ProgramOp& op, const Spec& a, const Spec& b, const Spec& out) {
    auto& known = contractions_[op.eq + " " + a.text() + " " + b.text()];
    if (known.empty())
      for (const auto& r : contraction_costs(Einsum::parse(op.eq), mesh_, {op.in[0], a, p_.shape(op.in[0])},
                                             {op.in[1], b, p_.shape(op.in[1])}, {false, op.out, 1}))
        known[r.spec.text()] = double(r.bytes);
    auto it = known.find(out.text());
    return it == known.end() ? kInf : it->second;
  }

  const TensorProgram& p_;
  const Mesh& mesh_;
  std::map<std::string, std::map<std::string, double>> reshards_, contractions_;
};

// Branch and bound over the free tensors' layouts, in program order.
class Search {
 public:
  Search(const TensorProgram& p, const Mesh& mesh, std::vector<std::vector<Spec>> choices,
         std::map<std::string, int> var, std::map<std::string, Spec> fixed, std::map<std::string, std::string> same_as)
      : p_(p), price_(p, mesh), choices_(std::move(choices)), var_(std::move(var)), fixed_(std::move(fixed)),
        same_as_(std::move(same_as)), pick_(choices_.size(), 0), ops_at_(choices_.size()) {
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      int last = -1;
      for (const auto& t : tensors(p.ops[i])) last = std::max(last, var_of(t));
      if (last < 0) base_ += cost(i);
      else ops_at_[static_cast<std::size_t>(last)].push_back(i);
    }
  }

  // Every op's elements sent under the current picks.
  double total() {
    double sum = base_;
    for (const auto& list : ops_at_)
      for (std::size_t i : list) sum += cost(i);
    return sum;
  }

  // The cheapest picks, starting from the current ones (propagation's) as the best so far.
  double run() {
    best_ = total();
    best_pick_ = pick_;
    descend(0, base_);
    pick_ = best_pick_;
    return best_;
  }
  const std::vector<int>& picks() const { return pick_; }

  // Over the budget: one greedy pass in program order (each free tensor the layout that makes the
  // ops it completes cheapest, given the ones before), then passes of single changes (each tensor
  // the layout that makes every op touching it cheapest, the others held) until none helps. Not
  // sure to find the cheapest assignment; kept only where it beats propagation's.
  double improve() {
    const double rules = total();
    const std::vector<int> rules_pick = pick_;
    std::vector<std::vector<std::size_t>> touching(choices_.size());
    for (std::size_t i = 0; i < p_.ops.size(); ++i)
      for (const auto& t : tensors(p_.ops[i]))
        if (var_of(t) >= 0) {
          auto& list = touching[static_cast<std::size_t>(var_of(t))];
          if (list.empty() || list.back() != i) list.push_back(i);
        }
    auto cheapest = [&](std::size_t v, const std::vector<std::size_t>& ops) {
      double best = kInf;
      int at = pick_[v];
      for (std::size_t c = 0; c < choices_[v].size(); ++c) {
        pick_[v] = static_cast<int>(c);
        double sum = 0;
        for (std::size_t i : ops) sum += cost(i);
        if (sum < best) {
          best = sum;
          at = static_cast<int>(c);
        }
      }
      pick_[v] = at;
    };
    for (std::size_t v = 0; v < choices_.size(); ++v) cheapest(v, ops_at_[v]);
    for (int pass = 0; pass < 20; ++pass) {
      const std::vector<int> before = pick_;
      for (std::size_t v = 0; v < choices_.size(); ++v) cheapest(v, touching[v]);
      if (pick_ == before) break;
    }
    const double found = total();
    if (found < rules) return found;
    pick_ = rules_pick;
    return rules;
  }

 private:
  std::vector<std::string> tensors(const ProgramOp& op) const {
    std::vector<std::string> ts = op.in;
    ts.push_back(op.out);
    return ts;
  }
  int var_of(const std::string& t) const {
    auto same = same_as_.find(t);
    if (same != same_as_.end()) return var_of(same->second);
    auto it = var_.find(t);
    return it == var_.end() ? -1 : it->second;
  }

 public:
  // A free rename's output lies as its input does (by position).
  const Spec& spec(const std::string& t) const {
    auto same = same_as_.find(t);
    if (same != same_as_.end()) return spec(same->second);
    const int v = var_of(t);
    return v < 0 ? fixed_.at(t) : choices_[static_cast<std::size_t>(v)][static_cast<std::size_t>(pick_[static_cast<std::size_t>(v)])];
  }

 private:
  double cost(std::size_t i) {
    const ProgramOp& op = p_.ops[i];
    std::vector<int> key;
    for (const auto& t : tensors(op)) key.push_back(var_of(t) < 0 ? -1 : pick_[static_cast<std::size_t>(var_of(t))]);
    key.push_back(static_cast<int>(i));
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    std::vector<Spec> in;
    for (const auto& t : op.in) in.push_back(spec(t));
    return memo_[key] = price_.op(op, in, spec(op.out));
  }
  void descend(std::size_t v, double paid) {
    if (paid >= best_) return;
    if (v == choices_.size()) {
      best_ = paid;
      best_pick_ = pick_;
      return;
    }
    for (std::size_t c = 0; c < choices_[v].size(); ++c) {
      pick_[v] = static_cast<int>(c);
      double more = 0;
      for (std::size_t i : ops_at_[v]) more += cost(i);
      if (more < kInf) descend(v + 1, paid + more);
    }
    pick_[v] = 0;
  }

  const TensorProgram& p_;
  Pricer price_;
  std::vector<std::vector<Spec>> choices_;
  std::map<std::string, int> var_;
  std::map<std::string, Spec> fixed_;
  std::map<std::string, std::string> same_as_;
  std::vector<int> pick_, best_pick_;
  std::vector<std::vector<std::size_t>> ops_at_;
  std::map<std::vector<int>, double> memo_;
  double base_ = 0, best_ = kInf;
};

}  // namespace

Spec restricted(const Spec& out, const std::string& out_dims, const std::string& dims) {
  Spec s = Spec::replicated(dims.size());
  for (std::size_t d = 0; d < dims.size(); ++d) s.dims[d] = out.dims[out_dims.find(dims[d])];
  return s;
}

Spec widened(const Spec& out, const std::string& out_dims, const std::string& dims) {
  Spec s = Spec::replicated(dims.size());
  for (std::size_t d = 0; d < dims.size(); ++d) {
    const std::size_t at = out_dims.find(dims[d]);
    if (at != std::string::npos) s.dims[d] = out.dims[at];
  }
  return s;
}

Spec reduced(const Spec& s, const std::string& dims, const std::string& over, bool partial) {
  Spec r;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (over.find(dims[d]) == std::string::npos)
      r.dims.push_back(s.dims[d]);
    else if (partial)
      r.partial.insert(r.partial.end(), s.dims[d].begin(), s.dims[d].end());
  }
  return r;
}

std::vector<Spec> all_layouts(const Mesh& mesh, const Shape& shape, const std::vector<std::size_t>& whole) {
  std::vector<std::string> axes;
  for (const auto& a : mesh.names())
    if (mesh.axis_size(a) > 1) axes.push_back(a);
  std::vector<Spec> out;
  Spec s = Spec::replicated(shape.size());
  place(mesh, shape, whole, axes, 0, s, out);
  return out;
}

Propagation search_layouts(const TensorProgram& p, const Mesh& mesh, Propagation prop, LayoutSearch* info,
                           double budget) {
  LayoutSearch local;
  LayoutSearch& r = info ? *info : local;
  r = LayoutSearch{};
  // Dims a softmax needs whole, per tensor.
  std::map<std::string, std::vector<std::size_t>> whole;
  for (const auto& op : p.ops)
    if (op.kind == OpKind::softmax || op.kind == OpKind::concat)
      for (char c : op.over) whole[op.out].push_back(p.dims.at(op.out).find(c));
  // A free rename's output is not searched: it lies as its input does, so that a copy the input
  // is moved into serves both (harness/plan/program_plan.hpp) and the rename never moves a second.
  std::map<std::string, std::string> same_as;
  for (const auto& op : p.ops)
    if (op.kind == OpKind::rename && prop.specs.at(op.out).free) same_as[op.out] = op.in[0];
  std::vector<std::vector<Spec>> choices;
  std::map<std::string, int> var;
  std::map<std::string, Spec> fixed;
  std::vector<std::string> names;
  for (const auto& t : p.tensors()) {
    const PropagatedSpec& s = prop.specs.at(t);
    const Spec rules = without_unit_axes(mesh, s.spec);
    if (same_as.count(t)) continue;
    if (!s.free) {
      fixed[t] = rules;
      continue;
    }
    std::vector<Spec> list = all_layouts(mesh, p.shape(t), whole[t]);
    list.erase(std::remove(list.begin(), list.end(), rules), list.end());
    list.insert(list.begin(), rules);  // propagation's first: ties keep it
    var[t] = static_cast<int>(choices.size());
    names.push_back(t);
    r.assignments *= double(list.size());
    choices.push_back(std::move(list));
  }
  r.free_tensors = choices.size();
  if (choices.empty()) return prop;
  r.searched = true;
  r.exhaustive = r.assignments <= budget;
  Search search(p, mesh, choices, var, fixed, same_as);
  r.rules_elements = search.total();
  r.best_elements = r.exhaustive ? search.run() : search.improve();
  for (std::size_t v = 0; v < choices.size(); ++v) {
    const int c = search.picks()[v];
    if (c == 0) continue;
    PropagatedSpec& s = prop.specs.at(names[v]);
    s.origin = "layout search: the program sends " + format_number(r.best_elements, "%.0f") +
               " elements per device, " + format_number(r.rules_elements, "%.0f") + " with the rules' " +
               s.spec.text() + " (" + s.origin + "); " +
               (r.exhaustive ? format_number(r.assignments, "%.0f") + " choices tried"
                             : "a local search of " + format_number(r.assignments, "%.3g") + " choices");
    s.spec = choices[v][static_cast<std::size_t>(c)];
    r.changed.push_back(names[v]);
  }
  for (const auto& op : p.ops) {
    if (!same_as.count(op.out)) continue;
    PropagatedSpec& s = prop.specs.at(op.out);
    const Spec& in = search.spec(op.in[0]);
    if (without_unit_axes(mesh, s.spec) == in) continue;
    s.origin = "as " + op.in[0] + " lies (a rename: the same blocks), after the layout search";
    s.spec = in;
    r.changed.push_back(op.out);
  }
  return prop;
}

}  // namespace shardlab
