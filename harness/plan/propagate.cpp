#include "harness/plan/propagate.hpp"

#include <algorithm>
#include <set>
#include <optional>

#include "core/error.hpp"
#include "core/text.hpp"
#include "core/table.hpp"
#include "harness/plan/layout_search.hpp"
#include "harness/plan/planner.hpp"

namespace shardlab {

namespace {

using Axes = std::vector<std::string>;

// Axes per dim letter of a tensor with a known spec.
std::map<char, Axes> by_letter(const std::string& dims, const Spec& s) {
  std::map<char, Axes> out;
  for (std::size_t i = 0; i < dims.size(); ++i) out[dims[i]] = s.dims[i];
  return out;
}

class Propagator {
 public:
  Propagator(const TensorProgram& p, const Mesh& mesh) : p_(p), mesh_(mesh) {}

  void annotate(const std::map<std::string, std::string>& annotations) {
    for (const auto& [tensor, text] : annotations) {
      if (!p_.dims.count(tensor)) throw Error(ErrorKind::parse, "shard names " + tensor + ", which the program lacks");
      if (text == "auto") {
        if (p_.is_input(tensor))
          throw Error(ErrorKind::parse, "shard " + tensor + " = \"auto\": " + tensor +
                                            " is a program input, which lies where its data is; auto is for op outputs");
        auto_.insert(tensor);
        continue;
      }
      Spec s;
      try {
        s = Spec::parse(text);
        if (s.is_partial()) throw Error(ErrorKind::parse, "an annotation cannot hold partial sums");
        s.validate(mesh_, p_.shape(tensor), tensor);
      } catch (const Error& e) {
        throw Error(ErrorKind::parse, "shard " + tensor + " = \"" + text + "\": " + e.what());
      }
      set(tensor, s, "annotated");
      out_.specs[tensor].annotated = true;
      ++out_.annotated;
    }
  }

  void fix(const std::map<std::string, PropagatedSpec>& fixed) {
    for (const auto& [tensor, s] : fixed) {
      out_.specs[tensor] = s;
      out_.specs[tensor].free = false;  // decided elsewhere: the layout search keeps it
    }
  }

  // Rule 2: tensors with exactly an annotated tensor's dims; of several, the most split (as
  // DTensor's pointwise strategy follows its most sharded operand), so the order in which tensors
  // are declared does not decide; ties go to the first declared.
  void like_annotated() {
    for (const auto& t : p_.tensors()) {
      if (known(t)) continue;
      std::string best;  // tensors() is a copy: keep the name, not a pointer into it
      for (const auto& u : p_.tensors())
        if (known(u) && out_.specs.at(u).annotated && p_.dims.at(u) == p_.dims.at(t) &&
            (best.empty() || split_ways(u) > split_ways(best)))
          best = u;
      if (!best.empty()) set(t, out_.specs.at(best).spec, "like " + best + " (same dims " + p_.dims.at(t) + ")");
    }
  }

  // Rule 3: op by op; an op whose inputs are not all known derives what it can from the known ones.
  void forward() {
    for (std::size_t i = 0; i < p_.ops.size(); ++i) {
      const ProgramOp& op = p_.ops[i];
      if (known(op.out)) continue;
      std::vector<std::string> from;
      for (const auto& t : op.in)
        if (known(t)) from.push_back(t);
      if (from.empty()) continue;
      most_split_first(from);
      const std::string& dims = p_.dims.at(op.out);
      std::map<char, Axes> axes;
      // The most split operand that has a letter gives its axes (a rename's: by position).
      for (const auto& t : from)
        for (const auto& [c, a] : by_letter(op.kind == OpKind::rename ? op.to : p_.dims.at(t), spec(t)))
          if (!axes.count(c)) axes[c] = a;
      set_from(op.out, dims, axes, "from " + join(from, " and ") + " through " + op_label(p_, i));
    }
  }

  // Rule 4: open tensors read by an op take each dim's axes from the op's other tensors.
  void backward() {
    for (std::size_t i = p_.ops.size(); i-- > 0;) {
      const ProgramOp& op = p_.ops[i];
      for (const auto& t : op.in) {
        if (known(t)) continue;
        std::vector<std::string> from;
        for (const auto& u : op.in)
          if (u != t && known(u)) from.push_back(u);
        if (known(op.out)) from.push_back(op.out);
        if (from.empty()) continue;
        most_split_first(from);
        std::map<char, Axes> axes;
        for (const auto& u : from) {
          const bool renamed = op.kind == OpKind::rename && u == op.out;  // by position
          for (const auto& [c, a] : by_letter(renamed ? p_.dims.at(t) : p_.dims.at(u), spec(u)))
            if (!axes.count(c)) axes[c] = a;
        }
        set_from(t, p_.dims.at(t), axes, "from " + join(from, " and ") + " back through " + op_label(p_, i));
      }
    }
  }

  void rest() {
    for (const auto& t : p_.tensors())
      if (!known(t)) set(t, Spec::replicated(p_.dims.at(t).size()), "replicated: nothing constrains it", true);
  }

  // Softmax needs its dim whole, whatever rule gave its output a spec; so does the dim a concat
  // stacks its parts along (each device stacks whole parts).
  void softmax_whole() {
    for (const auto& op : p_.ops) {
      if (op.kind != OpKind::softmax && op.kind != OpKind::concat) continue;
      PropagatedSpec& s = out_.specs.at(op.out);
      for (char c : op.over) {
        const std::size_t d = p_.dims.at(op.out).find(c);
        if (s.spec.dims[d].empty()) continue;
        if (s.annotated)
          throw Error(ErrorKind::parse, "shard " + op.out + " = \"" + s.spec.text() + "\" splits dim " +
                                            std::string(1, c) + ", which its " + op.name + " needs whole");
        s.spec.dims[d].clear();
        s.origin += "; dim " + std::string(1, c) + " whole for the " + op.name;
      }
    }
  }

  const std::set<std::string>& auto_tensors() const { return auto_; }

  Propagation result() { return std::move(out_); }

 private:
  bool known(const std::string& t) const { return out_.specs.count(t) > 0; }
  // Into how many blocks a known tensor is split: the product of its axes' sizes.
  int split_ways(const std::string& t) const {
    int n = 1;
    for (const auto& d : spec(t).dims)
      for (const auto& a : d) n *= mesh_.axis_size(a);
    return n;
  }
  // The most split tensors first; equal ones keep their order (declaration, or the op's inputs).
  void most_split_first(std::vector<std::string>& ts) const {
    std::stable_sort(ts.begin(), ts.end(), [&](const std::string& a, const std::string& b) { return split_ways(a) > split_ways(b); });
  }
  const Spec& spec(const std::string& t) const { return out_.specs.at(t).spec; }
  void set(const std::string& t, const Spec& s, const std::string& origin, bool free = false) {
    out_.specs[t] = {s, origin, false, free && !p_.is_input(t)};
  }

  // A spec from axes per letter, made valid: an axis used by an earlier dim, or one that does not
  // divide what is left of the dim, is dropped.
  void set_from(const std::string& t, const std::string& dims, const std::map<char, Axes>& axes, std::string origin) {
    Spec s = Spec::replicated(dims.size());
    Axes used, dropped;
    const Shape shape = p_.shape(t);
    for (std::size_t d = 0; d < dims.size(); ++d) {
      auto it = axes.find(dims[d]);
      if (it == axes.end()) continue;
      std::size_t left = shape[d];
      for (const auto& a : it->second) {
        const std::size_t n = static_cast<std::size_t>(mesh_.axis_size(a));
        const bool uneven = mesh_.uneven() != Uneven::none;  // then any size splits
        if (std::find(used.begin(), used.end(), a) != used.end() || (left % n != 0 && !uneven)) {
          dropped.push_back(a);
          continue;
        }
        used.push_back(a);
        left = (left + n - 1) / n;
        s.dims[d].push_back(a);
      }
    }
    if (!dropped.empty()) origin += "; dropped " + join(dropped, ", ") + " (used twice or not dividing)";
    set(t, s, origin, true);
  }

  const TensorProgram& p_;
  const Mesh& mesh_;
  Propagation out_;
  std::set<std::string> auto_;  // annotated "auto"
};

}  // namespace

Propagation propagate(const TensorProgram& p, const Mesh& mesh, const std::map<std::string, std::string>& annotations,
                      const std::map<std::string, PropagatedSpec>& fixed, bool auto_all) {
  Propagator g(p, mesh);
  g.fix(fixed);
  g.annotate(annotations);
  g.like_annotated();
  g.forward();
  g.backward();
  g.forward();
  g.rest();
  g.softmax_whole();
  const std::set<std::string> asked = g.auto_tensors();
  Propagation rules = g.result();
  if (auto_all) return search_layouts(p, mesh, std::move(rules));
  if (asked.empty()) return rules;
  // Rule 7 for the tensors marked "auto" only: the others are held while it searches.
  std::set<std::string> held;
  for (auto& [name, s] : rules.specs)
    if (s.free && !asked.count(name)) {
      s.free = false;
      held.insert(name);
    }
  Propagation searched = search_layouts(p, mesh, std::move(rules));
  for (const auto& name : held) searched.specs.at(name).free = true;
  return searched;
}

std::string propagation_text(const TensorProgram& p, const Propagation& prop) {
  Table t({"tensor", "dims", "spec", "from"});
  for (const auto& name : p.tensors()) {
    const auto& s = prop.specs.at(name);
    t.add({name, p.dims.at(name), s.spec.notation(name, dim_names(p.dims.at(name))), s.origin});
  }
  return t.text();
}

}  // namespace shardlab
