#include "harness/plan/gradient.hpp"

#include <set>

#include "core/einsum.hpp"
#include "core/error.hpp"

namespace shardlab {

namespace {

// The parts that the splits' gradients may stack, all splits together.
constexpr std::size_t kMaxStackedParts = 256;

class Deriver {
 public:
  explicit Deriver(const TensorProgram& f) : f_(f), g_(f) {
    for (const auto& t : f.tensors()) names_.insert(t);
  }

  GradientProgram run() {
    count_uses();
    GradientProgram out;
    out.forward_ops = f_.ops.size();
    for (const auto& y : f_.outputs) {
      if (!needs_.count(y)) continue;
      const std::string dy = contribution_name(y);
      g_.inputs.push_back({dy, f_.dims.at(y)});
      out.seeds.push_back({y, dy});
      contribs_[y].push_back(dy);
    }
    for (std::size_t i = f_.ops.size(); i-- > 0;) {
      if (!needs_.count(f_.ops[i].out) || f_.ops[i].name == "stop_gradient") continue;
      deriving_ = static_cast<int>(i);
      derive(i, finish(f_.ops[i].out));
    }
    deriving_ = -1;
    for (const auto& [x, dims] : f_.inputs) {
      if (!needs_.count(x))
        throw Error(ErrorKind::unsupported, "backward: no output depends on input " + x +
                                                ", so its gradient is zero everywhere; use it or remove it");
      // An input's gradient is a tensor of its own, lying as the input does, even where the
      // rules pass one on unchanged (x + w: dx and dw are both dz).
      std::string dx = finish(x);
      if (dx != grad_name(x)) dx = grad_[x] = emit(grad_name(x), "copy", {dx});
      out.grads.push_back({x, dx});
    }
    g_.outputs = f_.outputs;
    for (const auto& kv : out.grads) g_.outputs.push_back(kv.second);
    for (const auto& [t, dt] : grad_)  // a tensor named as t's gradient is t's, first
      if (dt == whole_[t]) out.gradient_of[dt] = t;
    for (const auto& [t, dt] : grad_)  // then one passed on unchanged (an add's dz is also da)
      if (!out.gradient_of.count(dt)) out.gradient_of[dt] = t;
    out.program = make_program(g_);
    return out;
  }

 private:
  // Which tensors need a gradient (the loss depends on them, and they on an input, neither through
  // a stop_gradient), and how many contributions each one's gradient adds.
  void count_uses() {
    std::set<std::string> reaches(f_.outputs.begin(), f_.outputs.end()), from_inputs;
    for (const auto& kv : f_.inputs) from_inputs.insert(kv.first);
    for (const auto& op : f_.ops)
      if (op.name != "stop_gradient")
        for (const auto& t : op.in)
          if (from_inputs.count(t)) from_inputs.insert(op.out);
    for (std::size_t i = f_.ops.size(); i-- > 0;)
      if (reaches.count(f_.ops[i].out) && f_.ops[i].name != "stop_gradient")
        for (const auto& t : f_.ops[i].in) reaches.insert(t);
    for (const auto& t : reaches)
      if (from_inputs.count(t)) needs_.insert(t);
    for (const auto& y : f_.outputs)
      if (needs_.count(y)) ++uses_[y];
    std::set<std::pair<std::string, std::string>> split_groups;  // the splits of t over one dim give one
    for (const auto& op : f_.ops)
      if (needs_.count(op.out) && op.name != "stop_gradient")
        for (const auto& t : op.in)
          if (needs_.count(t) && (op.kind != OpKind::split || split_groups.insert({t, op.over}).second)) ++uses_[t];
    // A split's gradient stacks one part per index of its dim, each part an op of its own (zeros
    // where no op used the part): refused before any is made when that would not plan in seconds.
    std::size_t parts = 0;
    for (const auto& [t, over] : split_groups) {
      parts += f_.sizes.at(over[0]);
      if (parts > kMaxStackedParts)
        throw Error(ErrorKind::unsupported,
                    "backward: the gradient of the split of " + t + " over " + over + " (" +
                        std::to_string(f_.sizes.at(over[0])) + " parts) stacks one op per part, more than the " +
                        std::to_string(kMaxStackedParts) + " a gradient program may stack to be planned in seconds; "
                        "give " + over + " at most " + std::to_string(kMaxStackedParts) + " or set backward = false");
    }
  }

  // base, or base_2, base_3 ... the first not taken. Names are only ever added, so the search for
  // a base goes on from where its last one stopped: linear in the names made, not quadratic.
  std::string fresh(const std::string& base) {
    int& k = next_suffix_[base];  // the last suffix tried (1: base itself)
    std::string n;
    do n = ++k == 1 ? base : base + "_" + std::to_string(k);
    while (names_.count(n));
    names_.insert(n);
    return n;
  }

  // The name of t's whole gradient: dt, or d_t, d_t_2 ... when taken.
  const std::string& grad_name(const std::string& t) {
    auto it = whole_.find(t);
    if (it != whole_.end()) return it->second;
    std::string n = "d" + t;
    if (names_.count(n)) n = fresh("d_" + t);
    names_.insert(n);
    return whole_[t] = n;
  }

  // The name for a new contribution to t's gradient: the whole gradient's when it is the only one.
  std::string contribution_name(const std::string& t) {
    if (uses_.at(t) == 1) return grad_name(t);
    return fresh(grad_name(t) + "_" + std::to_string(contribs_[t].size() + 1));
  }

  std::string emit(const std::string& out, const std::string& name, std::vector<std::string> in,
                   const std::string& eq = "", const std::string& over = "", const std::string& to = "",
                   double scale = 1) {
    ProgramOp op;
    op.out = out;
    op.name = name;
    op.in = std::move(in);
    op.eq = eq;
    op.over = over;
    op.to = to;
    op.scale = scale;
    op.from_op = deriving_;
    if (deriving_ >= 0) op.part = f_.ops[static_cast<std::size_t>(deriving_)].part;
    g_.ops.push_back(op);
    return out;
  }

  // t's gradient, its contributions added (in the order they came). The parts split from t along
  // one dim are first stacked back by one concat, a part no op used filled with zeros.
  std::string finish(const std::string& t) {
    for (auto& [key, pieces] : pieces_) {
      if (key.first != t) continue;
      const std::string& any = pieces.begin()->second;
      std::vector<std::string> in;
      for (std::size_t k = 0; k < f_.sizes.at(key.second[0]); ++k) {
        if (pieces.count(k)) {
          in.push_back(pieces.at(k));
          continue;
        }
        in.push_back(emit(fresh("zero_" + any), "scale", {any}));
        g_.ops.back().value = 0;
        g_.ops.back().has_value = true;
      }
      contribute(t, emit(contribution_name(t), "concat", in, "", key.second, f_.dims.at(t)));
    }
    const auto& parts = contribs_[t];
    std::string acc = parts.at(0);
    for (std::size_t k = 1; k < parts.size(); ++k)
      acc = emit(k + 1 == parts.size() ? grad_name(t) : fresh(grad_name(t) + "_sum" + std::to_string(k)), "add",
                 {acc, parts[k]});
    grad_[t] = acc;
    return acc;
  }

  void contribute(const std::string& t, const std::string& tensor) { contribs_[t].push_back(tensor); }

  // A gradient `full` with dims `full_dims` brought to operand t's dims: summed over the dims t
  // lacks and put in t's order (a broadcast to t's own dims transposes), times `scale`.
  void contribute_reduced(const std::string& t, const std::string& full, const std::string& full_dims,
                          double scale = 1) {
    const std::string& dims = f_.dims.at(t);
    std::string over, kept;
    for (char c : full_dims) (dims.find(c) == std::string::npos ? over : kept) += c;
    if (over.empty() && kept == dims && scale == 1) return contribute(t, full);
    std::string s = full;
    if (!over.empty())
      s = emit(kept == dims && scale == 1 ? contribution_name(t) : fresh(grad_name(t) + "_summed"), "sum", {full}, "",
               over);
    if (kept != dims || scale != 1) s = emit(contribution_name(t), "broadcast", {s}, "", "", dims, scale);
    contribute(t, s);
  }

  void derive(std::size_t i, const std::string& dz) {
    const ProgramOp& op = f_.ops[i];
    const std::string& z = op.out;
    const std::string& Z = f_.dims.at(z);
    const std::string& a = op.in[0];
    const std::string& A = f_.dims.at(a);
    const std::string label = op_label(f_, i);
    bool any = false;
    for (const auto& t : op.in) any = any || needs_.count(t) > 0;
    if (!any) return;
    if (op.name == "eq" || op.name == "is_max" || op.name.find("_grad") != std::string::npos)
      throw Error(ErrorKind::unsupported, "backward: " + label + ": " + op.name + " has no gradient rule");
    switch (op.kind) {
      case OpKind::einsum: {
        const Einsum e = Einsum::parse(op.eq);
        const std::string& b = op.in[1];
        if (needs_.count(a)) {
          contribute(a, emit(contribution_name(a), "einsum", {dz, b}, Z + "," + e.b + "->" + e.a));
          g_.ops.back().grad_operand = 0;
        }
        if (needs_.count(b)) {
          contribute(b, emit(contribution_name(b), "einsum", {a, dz}, e.a + "," + Z + "->" + e.b));
          g_.ops.back().grad_operand = 1;
        }
        break;
      }
      case OpKind::unary:
        if (op.name == "neg" || op.name == "copy") {
          contribute(a, emit(contribution_name(a), op.name, {dz}));
        } else if (op.name == "scale") {
          contribute(a, emit(contribution_name(a), "scale", {dz}));
          g_.ops.back().value = op.value;
          g_.ops.back().has_value = true;
        } else if (op.name == "shift") {
          contribute(a, dz);
        } else if (op.name == "roll") {  // the opposite roll: a shift's gradient shifts back
          contribute(a, emit(contribution_name(a), "roll", {dz}, "", op.over));
          g_.ops.back().value = -op.value;
          g_.ops.back().has_value = true;
        } else if (op.name == "exp") {
          contribute(a, emit(contribution_name(a), "mul", {dz, z}));
        } else {
          const std::string slope = emit(fresh(op.name + "_grad_" + a), op.name + "_grad", {a});
          contribute(a, emit(contribution_name(a), "mul", {dz, slope}));
        }
        break;
      case OpKind::binary: {
        const std::string& b = op.in[1];
        for (int k = 0; k < 2; ++k) {
          const std::string& t = op.in[static_cast<std::size_t>(k)];
          const std::string& other = op.in[static_cast<std::size_t>(1 - k)];
          if (!needs_.count(t)) continue;
          const bool whole = f_.dims.at(t) == Z;
          auto name = [&] { return whole ? contribution_name(t) : fresh(grad_name(t) + "_full"); };
          std::string full;
          if (op.name == "add" || (op.name == "sub" && k == 0)) {
            full = dz;
          } else if (op.name == "sub") {
            full = emit(name(), "neg", {dz});
          } else if (op.name == "mul") {
            full = emit(name(), "mul", {dz, other});
          } else if (op.name == "div" && k == 0) {
            full = emit(name(), "div", {dz, b});
          } else if (op.name == "div") {
            const std::string q = emit(fresh(z + "_over_" + b), "div", {z, b});
            const std::string m = emit(fresh(dz + "_times_" + q), "mul", {dz, q});
            full = emit(name(), "neg", {m});
          } else {
            throw Error(ErrorKind::unsupported, "backward: " + label + ": " + op.name + " has no gradient rule");
          }
          contribute_reduced(t, full, Z);
        }
        break;
      }
      case OpKind::reduce: {
        if (op.name == "max") {
          const std::string mask = emit(fresh("is_max_" + a), "is_max", {a, z});
          const std::string count = emit(fresh("max_count_" + z), "sum", {mask}, "", op.over);
          const std::string share = emit(fresh("max_share_" + a), "div", {mask, count});
          contribute(a, emit(contribution_name(a), "mul", {share, dz}));
        } else {
          double n = 1;
          for (char c : op.over) n *= double(f_.sizes.at(c));
          contribute(a, emit(contribution_name(a), "broadcast", {dz}, "", "", A, op.name == "mean" ? 1 / n : 1));
        }
        break;
      }
      case OpKind::softmax: {
        const std::string p = emit(fresh(dz + "_times_" + z), "mul", {dz, z});
        const std::string s = emit(fresh("softmax_sum_" + z), "sum", {p}, "", op.over);
        const std::string q = emit(fresh(dz + "_minus_" + s), "sub", {dz, s});
        contribute(a, emit(contribution_name(a), "mul", {z, q}));
        break;
      }
      case OpKind::broadcast:
        contribute_reduced(a, dz, Z, op.scale);
        break;
      case OpKind::rename:
        contribute(a, emit(contribution_name(a), "rename", {dz}, "", "", A));
        break;
      case OpKind::split:  // a part of a's gradient: stacked with the other parts when a finishes
        pieces_[{a, op.over}][static_cast<std::size_t>(op.value)] = dz;
        break;
      case OpKind::concat:
        for (std::size_t k = 0; k < op.in.size(); ++k) {
          if (!needs_.count(op.in[k])) continue;
          contribute(op.in[k], emit(contribution_name(op.in[k]), "split", {dz}, "", op.over));
          g_.ops.back().value = double(k);
          g_.ops.back().has_value = true;
        }
        break;
    }
  }

  const TensorProgram& f_;
  TensorProgram g_;
  std::set<std::string> names_, needs_;
  int deriving_ = -1;  // the forward op whose rule is being applied (-1: the inputs' last adds)
  std::map<std::string, int> uses_;
  std::map<std::string, int> next_suffix_;  // fresh(): the last suffix tried for a base name
  std::map<std::string, std::vector<std::string>> contribs_;
  std::map<std::string, std::string> whole_, grad_;
  // (tensor, dim) -> part -> the gradient of that part of a split of the tensor along the dim
  std::map<std::pair<std::string, std::string>, std::map<std::size_t, std::string>> pieces_;
};

}  // namespace

GradientProgram gradient_program(const TensorProgram& forward) { return Deriver(forward).run(); }

Propagation gradient_propagation(const GradientProgram& g, const Mesh& mesh, const Propagation& forward) {
  std::map<std::string, PropagatedSpec> fixed = forward.specs;
  for (auto& kv : fixed) kv.second.annotated = false;
  for (const auto& [dt, t] : g.gradient_of)
    if (!fixed.count(dt)) fixed[dt] = {forward.specs.at(t).spec, "like " + t + ": a gradient lies as its tensor does"};
  // The forward tensors and the gradients are fixed, in the layouts the user sees (the forward's
  // natural ones). The helpers between them (a gradient's partial contributions, gelu'(h)) take
  // the layouts that make the backward send the fewest bytes: a partial dx_2 that an add meets
  // with dx split over s is reduce-scattered into that split, as DTensor's Partial placement is
  // redistributed to its consumer's Shard and XLA fuses an AllReduce and a slice.
  Propagation p = propagate(g.program, mesh, {}, fixed, true);
  p.annotated = forward.annotated;
  for (const auto& [t, s] : forward.specs) p.specs.at(t).annotated = s.annotated;
  return p;
}

}  // namespace shardlab
