// Running a plan: each step of plan_contraction's (or the search's) plan on one device's blocks,
// as the SPMD program a Runtime runs (declared in planner.hpp).
#include "harness/plan/planner.hpp"

#include "collectives/collectives.hpp"
#include "collectives/permute.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/text.hpp"
#include "harness/plan/operands.hpp"
#include "harness/plan/uneven_steps.hpp"

namespace shardlab {

namespace {
// The contract step in the program's own type; blocks held as double compute as the device's
// element type does (rounded to it, its arithmetic, the result rounded).
template <class T>
xt::xarray<T> local_contract(const Einsum& eq, const xt::xarray<T>& a, const xt::xarray<T>& b, DType) {
  return contract(eq, a, b);
}
template <>
Tensor local_contract<double>(const Einsum& eq, const Tensor& a, const Tensor& b, DType as) {
  return contract(eq, a, b, as);
}
}  // namespace

namespace {

// One step that acts on one tensor (not the contraction) on this device's block x.
template <class T>
xt::xarray<T> apply_step(Device& dev, const PlanStep& s, const xt::xarray<T>& x) {
  if (step_is_uneven(dev.mesh(), s.kind, s.dim, s.to_dim, s.before, s.after, s.global))
    return apply_uneven_step(dev, s, x);  // a dim that does not divide
  switch (s.kind) {
    case StepKind::all_gather: return all_gather(dev, x, s.axes, static_cast<std::size_t>(s.dim), s.tensor);
    case StepKind::reduce_scatter: return reduce_scatter(dev, x, s.axes, static_cast<std::size_t>(s.dim), s.tensor);
    case StepKind::all_reduce: return all_reduce(dev, x, s.axes, s.tensor);
    case StepKind::all_reduce_max: return all_reduce_max(dev, x, s.axes, s.tensor);
    case StepKind::all_to_all:  // split the destination dim among the group, concatenate along the source
      return all_to_all(dev, x, s.axes, static_cast<std::size_t>(s.to_dim), static_cast<std::size_t>(s.dim), s.tensor);
    case StepKind::collective_permute: return collective_shift(dev, x, s.axes, s.shift, s.tensor);
    case StepKind::local_slice: {
      // This device's part of dim `dim`: part k of n, k = its index along the slice axes.
      const Mesh& mesh = dev.mesh();
      const Shape in = shape_of(x);
      const std::size_t d = static_cast<std::size_t>(s.dim);
      const std::size_t n = static_cast<std::size_t>(mesh.axes_size(s.axes));
      const std::size_t k = static_cast<std::size_t>(mesh.index_along(dev.id(), s.axes));
      Shape outs = in;
      outs[d] = in[d] / n;
      xt::xarray<T> y = xt::empty<T>(outs);
      copy_out(x.data(), dtype_of<T>(), in, d, k * outs[d], outs[d], y.data(), dtype_of<T>());
      return y;
    }
    case StepKind::contract: break;
  }
  throw Error(ErrorKind::unsupported, "a contraction step in a list of steps on one tensor");
}

}  // namespace

template <class T>
xt::xarray<T> execute_steps(Device& dev, const std::vector<PlanStep>& steps, const xt::xarray<T>& x) {
  xt::xarray<T> cur = x;
  for (const auto& s : steps) cur = apply_step(dev, s, cur);
  return cur;
}
template xt::xarray<double> execute_steps<double>(Device&, const std::vector<PlanStep>&, const xt::xarray<double>&);
template xt::xarray<float> execute_steps<float>(Device&, const std::vector<PlanStep>&, const xt::xarray<float>&);
template xt::xarray<bfloat16> execute_steps<bfloat16>(Device&, const std::vector<PlanStep>&, const xt::xarray<bfloat16>&);

template <class T>
xt::xarray<T> execute_plan(Device& dev, const Plan& plan, const xt::xarray<T>& a_local, const xt::xarray<T>& b_local) {
  const Mesh& mesh = dev.mesh();
  // cur[o] is operand o as it stands: the caller's block until a step replaces it (no copies).
  xt::xarray<T> own[3];
  const xt::xarray<T>* cur[3] = {&a_local, &b_local, &own[kC]};
  const Operand* ops[2] = {&plan.a, &plan.b};
  for (int o = 0; o < 2; ++o) {
    const Shape want = block_of(mesh, ops[o]->spec, ops[o]->shape, dev.id()).stored_shape();
    if (shape_of(*cur[o]) != want)
      throw Error(ErrorKind::rank_mismatch, "device " + std::to_string(dev.id()) + " was given a block " +
                                                shape_text(shape_of(*cur[o])) + " of " + ops[o]->name + ", but spec " +
                                                ops[o]->spec.text() + " gives it " + shape_text(want));
  }
  for (const auto& s : plan.steps) {
    xt::xarray<T> y = s.kind == StepKind::contract ? local_contract(plan.eq, *cur[kA], *cur[kB], dev.dtype())
                                                    : apply_step(dev, s, *cur[s.operand]);
    const int o = s.kind == StepKind::contract ? kC : s.operand;
    own[o] = std::move(y);  // frees what this operand held before, unless it was the caller's
    cur[o] = &own[o];
  }
  return std::move(own[kC]);
}

template xt::xarray<double> execute_plan<double>(Device&, const Plan&, const xt::xarray<double>&,
                                                 const xt::xarray<double>&);
template xt::xarray<float> execute_plan<float>(Device&, const Plan&, const xt::xarray<float>&,
                                               const xt::xarray<float>&);
template xt::xarray<bfloat16> execute_plan<bfloat16>(Device&, const Plan&, const xt::xarray<bfloat16>&,
                                                     const xt::xarray<bfloat16>&);

SpmdProgram plan_spmd(const Plan& plan, const Tensor& a, const Tensor& b) {
  return [&plan, &a, &b](Device& dev) -> Outputs {
    const Tensor mine_a = local_block(a, dev.mesh(), plan.a.spec, dev.id());
    const Tensor mine_b = local_block(b, dev.mesh(), plan.b.spec, dev.id());
    return {{plan.result_name, execute_plan(dev, plan, mine_a, mine_b)}};
  };
}

}  // namespace shardlab
