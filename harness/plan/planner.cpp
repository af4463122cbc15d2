// The articles' rules: plan_contraction derives a contraction's steps rule by rule (planner.hpp).
// Running a plan is plan_execute.cpp; printing it, plan_text.cpp.
#include "harness/plan/planner.hpp"

#include <algorithm>
#include <cctype>

#include "collectives/predict.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/text.hpp"
#include "harness/plan/operands.hpp"
#include "harness/plan/uneven_steps.hpp"

namespace shardlab {

namespace {

using Axes = std::vector<std::string>;

std::size_t common_prefix(const Axes& x, const Axes& y) {
  std::size_t i = 0;
  while (i < x.size() && i < y.size() && x[i] == y[i]) ++i;
  return i;
}

bool is_prefix(const Axes& x, const Axes& of) { return common_prefix(x, of) == x.size(); }

std::string axes_or_dash(const Axes& axes) { return axes.empty() ? "_" : axes_text(axes); }


// The plan under construction: the current spec of A, B and the result, and the rules that
// append steps. Each rule reads the current specs, so their order is the plan's order.
struct Builder {
  Plan& plan;
  Spec cur[3];
  Shape global[3];
  std::string label[3];
  std::string letters[3];

  std::vector<std::string> names(int o) const { return dim_names(letters[o]); }
  std::string note(int o, const Spec& s) const { return s.notation(label[o], names(o)); }

  PlanStep start(StepKind kind, int o, const Axes& axes, int dim, const std::string& reason) {
    PlanStep s;
    s.kind = kind;
    s.operand = o;
    s.tensor = label[o];
    s.axes = axes;
    s.dim = dim;
    s.before = cur[o];
    s.local_before = local_shape(plan.mesh, cur[o], global[o]);
    s.reason = reason;
    s.global = global[o];
    return s;
  }
  void finish(PlanStep s, int o) {
    s.after = cur[o];
    s.local_after = local_shape(plan.mesh, cur[o], global[o]);
    if (s.communicates() && step_is_uneven(plan.mesh, s.kind, s.dim, s.to_dim, s.before, s.after, s.global))
      s.predicted_bytes = uneven_step_bytes(plan.mesh, s.kind, s.axes, s.dim, s.to_dim, s.before, s.after, s.global,
                                            plan.element_bytes);
    else if (s.communicates())
      s.predicted_bytes = predicted_bytes_sent(step_kind_name(s.kind), plan.mesh.axes_size(s.axes),
                                               bytes_of(s.local_before, plan.element_bytes), plan.element_bytes);
    plan.steps.push_back(std::move(s));
  }

  // AllGather the trailing axes of dim `d` from position `keep` on.
  void gather_from(int o, int d, std::size_t keep, const std::string& reason) {
    Axes& list = cur[o].dims[d];
    if (keep >= list.size()) return;
    const Axes gone(list.begin() + static_cast<long>(keep), list.end());
    PlanStep s = start(StepKind::all_gather, o, gone, d, reason);
    list.resize(keep);
    finish(std::move(s), o);
  }
  void slice(int o, int d, const Axes& more, const std::string& reason) {
    PlanStep s = start(StepKind::local_slice, o, more, d, reason);
    cur[o].dims[d].insert(cur[o].dims[d].end(), more.begin(), more.end());
    finish(std::move(s), o);
  }
  void reduce_scatter(int d, const Axes& run, const std::string& reason) {
    PlanStep s = start(StepKind::reduce_scatter, kC, run, d, reason);
    cur[kC].dims[d].insert(cur[kC].dims[d].end(), run.begin(), run.end());
    for (const auto& a : run) cur[kC].partial.erase(std::find(cur[kC].partial.begin(), cur[kC].partial.end(), a));
    finish(std::move(s), kC);
  }
  void all_reduce(const Axes& axes, const std::string& reason) {
    PlanStep s = start(StepKind::all_reduce, kC, axes, -1, reason);
    for (const auto& a : axes) cur[kC].partial.erase(std::find(cur[kC].partial.begin(), cur[kC].partial.end(), a));
    finish(std::move(s), kC);
  }

  int dim_of(int o, char letter) const { return static_cast<int>(letters[o].find(letter)); }

  // Rule 1: a dim in both operands (contracted or batch) must be split the same way in both.
  void align_shared_dims() {
    for (char c : plan.eq.contracted() + plan.eq.batch()) {
      const int da = dim_of(kA, c), db = dim_of(kB, c);
      const Axes x = cur[kA].dims[da], y = cur[kB].dims[db];
      if (x == y) continue;  // Case 1A: nothing moves
      const std::size_t keep = common_prefix(x, y);
      const std::string why = "dim " + std::string(1, c) + " is split " + axes_or_dash(x) + " in " + label[kA] +
                              " but " + axes_or_dash(y) + " in " + label[kB] + ": gather what they do not share";
      gather_from(kA, da, keep, why);
      gather_from(kB, db, keep, why);
    }
  }

  // Rule 2: outer dims of A and of B on the same mesh axis. The gathered operand gives up the
  // axis from its first clash to the end of that dim's list.
  void resolve_outer_clashes(bool gather_first) {
    const int keep = gather_first ? kB : kA, give = gather_first ? kA : kB;
    const std::string keep_free = gather_first ? plan.eq.b_free() : plan.eq.a_free();
    const std::string give_free = gather_first ? plan.eq.a_free() : plan.eq.b_free();
    Axes kept;
    for (char c : keep_free) {
      const Axes& l = cur[keep].dims[dim_of(keep, c)];
      kept.insert(kept.end(), l.begin(), l.end());
    }
    for (char c : give_free) {
      const int d = dim_of(give, c);
      const Axes& list = cur[give].dims[d];
      for (std::size_t i = 0; i < list.size(); ++i) {
        if (!contains_axis(kept, list[i])) continue;
        gather_from(give, d, i,
                    "outer dim " + std::string(1, c) + " of " + label[give] + " and an outer dim of " + label[keep] +
                        " are both on " + list[i] + ": gather " + label[give] + "'s, keep " + label[keep] + " split");
        break;
      }
    }
  }

  // Rule 3: the local contraction. Its spec: each output dim split as in the operand it comes
  // from, partial over the axes that split the contracted dims.
  void contract_locally() {
    Spec p = Spec::replicated(letters[kC].size());
    for (std::size_t i = 0; i < letters[kC].size(); ++i) {
      const char c = letters[kC][i];
      const int o = letters[kA].find(c) != std::string::npos ? kA : kB;
      p.dims[i] = cur[o].dims[dim_of(o, c)];
    }
    for (char c : plan.eq.contracted()) {
      const Axes& l = cur[kA].dims[dim_of(kA, c)];
      p.partial.insert(p.partial.end(), l.begin(), l.end());
    }
    p.validate(plan.mesh, global[kC], label[kC]);
    plan.a_used = cur[kA];
    plan.b_used = cur[kB];
    plan.product = p;
    cur[kC] = p;
    PlanStep s = start(StepKind::contract, kC, {}, -1,
                       p.is_partial() ? "local product; each is a partial sum over " + axes_text(p.partial)
                                      : "local product; every term of each sum is on this device");
    s.local_before = local_shape(plan.mesh, p, global[kC]);
    s.flops = contraction_flops(plan.eq, local_shape(plan.mesh, cur[kA], global[kA]),
                                local_shape(plan.mesh, cur[kB], global[kB]));
    finish(std::move(s), kC);
  }

  bool axis_in_use(const std::string& a) const {
    for (const auto& d : cur[kC].dims)
      if (contains_axis(d, a)) return true;
    return contains_axis(cur[kC].partial, a);
  }

  // Rule 4: from the product's spec to the target.
  void reach(const Spec& target) {
    Axes reduce;
    for (const auto& a : cur[kC].partial)
      if (!contains_axis(target.partial, a)) reduce.push_back(a);
    // Dims the target splits further than the product: slice (free) and reduce-scatter (the
    // partial axes) in the target's order, while the next axis is one of those two kinds.
    for (std::size_t d = 0; d < target.rank(); ++d) {
      const Axes& want = target.dims[d];
      if (!is_prefix(cur[kC].dims[d], want)) continue;
      std::size_t i = cur[kC].dims[d].size();
      while (i < want.size()) {
        Axes run;
        const bool reducing = contains_axis(reduce, want[i]);
        while (i < want.size() && (reducing ? contains_axis(reduce, want[i]) : !axis_in_use(want[i]) && !contains_axis(run, want[i]))) {
          run.push_back(want[i]);
          ++i;
        }
        if (run.empty()) break;
        if (reducing) {
          for (const auto& a : run) reduce.erase(std::find(reduce.begin(), reduce.end(), a));
          reduce_scatter(static_cast<int>(d), run,
                         "sum the partial products over " + axes_text(run) + ", each device keeping its slice of dim " +
                             std::string(1, letters[kC][d]));
        } else {
          slice(kC, static_cast<int>(d), run, "the output splits dim " + std::string(1, letters[kC][d]) + " over " +
                                                  axes_text(run) + ": keep this device's slice, no messages");
        }
      }
    }
    if (!reduce.empty())
      all_reduce(reduce, "sum the partial products over " + axes_text(reduce) + " on every device");
    for (std::size_t d = 0; d < target.rank(); ++d)
      gather_from(kC, static_cast<int>(d), common_prefix(cur[kC].dims[d], target.dims[d]),
                  "the output splits dim " + std::string(1, letters[kC][d]) + " as " + axes_or_dash(target.dims[d]));
    for (std::size_t d = 0; d < target.rank(); ++d) {
      const Axes& have = cur[kC].dims[d];
      if (have.size() < target.dims[d].size())
        slice(kC, static_cast<int>(d), Axes(target.dims[d].begin() + static_cast<long>(have.size()), target.dims[d].end()),
              "the output splits dim " + std::string(1, letters[kC][d]) + " over more axes: keep this device's slice");
    }
    cur[kC].partial = target.partial;
    if (cur[kC] != target)
      throw Error(ErrorKind::unsupported, "the planner could not turn " + plan.product.text() + " into " +
                                              target.text() + " for " + label[kC]);
  }
};

void check_operand(const Mesh& mesh, const Operand& o, const std::string& letters) {
  if (o.spec.rank() != letters.size())
    throw Error(ErrorKind::rank_mismatch, "spec " + o.spec.text() + " of " + o.name + " has " +
                                              std::to_string(o.spec.rank()) + " entries, but the einsum gives " +
                                              o.name + " " + std::to_string(letters.size()) + " dims (" + letters + ")");
  o.spec.validate(mesh, o.shape, o.name);
  if (o.spec.is_partial())
    throw Error(ErrorKind::unsupported, o.name + " has spec " + o.spec.text() + " with partial sums over " +
                                            axes_text(o.spec.partial) + "; the planner takes summed inputs, so reduce " +
                                            o.name + " first");
}

}  // namespace

std::string step_kind_name(StepKind kind) {
  switch (kind) {
    case StepKind::all_gather: return "all_gather";
    case StepKind::local_slice: return "local_slice";
    case StepKind::contract: return "contract";
    case StepKind::all_reduce: return "all_reduce";
    case StepKind::all_reduce_max: return "all_reduce_max";
    case StepKind::reduce_scatter: return "reduce_scatter";
    case StepKind::all_to_all: return "all_to_all";
    case StepKind::collective_permute: return "collective_permute";
  }
  return "?";
}

std::vector<std::string> dim_names(const std::string& letters) {
  std::vector<std::string> v;
  for (char c : letters) v.emplace_back(1, static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  return v;
}

std::size_t Plan::predicted_bytes_per_device() const {
  std::size_t n = 0;
  for (const auto& s : steps) n += s.predicted_bytes;
  return n;
}

double Plan::flops_per_device() const {
  for (const auto& s : steps)
    if (s.kind == StepKind::contract) return s.flops;
  return 0;
}

double Plan::unsharded_flops() const { return contraction_flops(eq, a.shape, b.shape); }

std::vector<const PlanStep*> Plan::collectives() const {
  std::vector<const PlanStep*> out;
  for (const auto& s : steps)
    if (s.communicates()) out.push_back(&s);
  return out;
}

std::size_t Plan::stored_bytes() const {
  return bytes_of(local_shape(mesh, a.spec, a.shape), element_bytes) +
         bytes_of(local_shape(mesh, b.spec, b.shape), element_bytes) +
         bytes_of(local_shape(mesh, out_spec, out_shape), element_bytes);
}

std::size_t Plan::working_bytes() const {
  return bytes_of(local_shape(mesh, a_used, a.shape), element_bytes) +
         bytes_of(local_shape(mesh, b_used, b.shape), element_bytes) +
         bytes_of(local_shape(mesh, product, out_shape), element_bytes);
}

Plan plan_contraction(const Einsum& eq, const Mesh& mesh, const Operand& a, const Operand& b,
                      const std::optional<Spec>& out, const PlanOptions& options) {
  if (a.name == b.name || a.name == options.result_name || b.name == options.result_name)
    throw Error(ErrorKind::parse, "tensor names must differ: " + a.name + ", " + b.name + ", " + options.result_name);
  check_operand(mesh, a, eq.a);
  check_operand(mesh, b, eq.b);
  const DimSizes sizes = eq.sizes(a.shape, b.shape);
  Plan plan;
  plan.eq = eq;
  plan.mesh = mesh;
  plan.a = a;
  plan.b = b;
  plan.result_name = options.result_name;
  plan.element_bytes = options.element_bytes;
  plan.out_shape = shape_for(eq.out, sizes);
  if (out) {
    if (out->rank() != eq.out.size())
      throw Error(ErrorKind::rank_mismatch, "output spec " + out->text() + " has " + std::to_string(out->rank()) +
                                                " entries, but the einsum's output " + options.result_name + " has " +
                                                std::to_string(eq.out.size()) + " dims (" + eq.out + ")");
    out->validate(mesh, plan.out_shape, options.result_name);
  }

  Builder bld{plan, {a.spec, b.spec, Spec()}, {a.shape, b.shape, plan.out_shape},
              {a.name, b.name, options.result_name}, {eq.a, eq.b, eq.out}};
  bld.align_shared_dims();
  bld.resolve_outer_clashes(options.gather_first_on_outer_conflict);
  bld.contract_locally();

  Spec target;
  if (out) {
    target = *out;
    for (const auto& u : target.partial)
      if (!contains_axis(plan.product.partial, u))
        throw Error(ErrorKind::unsupported, "output spec " + target.text() + " keeps partial sums over " + u +
                                                ", but the local products of " + plan.result_name + " are " +
                                                (plan.product.is_partial() ? "partial over " + axes_text(plan.product.partial)
                                                                           : "complete") +
                                                "; the planner only keeps sums the contraction leaves");
  } else {
    target = plan.product;
    target.partial.clear();
  }
  plan.out_given = out.has_value();
  plan.out_spec = target;
  bld.reach(target);
  return plan;
}

}  // namespace shardlab
