#include "harness/plan/plan_assembly.hpp"

#include <cctype>

#include "core/layout.hpp"
#include "core/text.hpp"
#include "harness/plan/operands.hpp"
#include "harness/plan/plan_search.hpp"

namespace shardlab::search_detail {

namespace {

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

}  // namespace

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

Plan assemble_plan(const SearchSides& sides, const Candidate& c, const std::vector<Move>& result_moves) {
  const Plan& art = sides.base;
  const Mesh& mesh = art.mesh;
  Plan plan = art;
  plan.steps.clear();
  const Spec product = sides.ops[kA].spec_of(c.product);
  Spec cur[3] = {without_unit_axes(mesh, art.a.spec), without_unit_axes(mesh, art.b.spec), product};
  auto push = [&](int o, const Move& m) {
    plan.steps.push_back(step_of(sides.subject[o], mesh, m, cur[o], o, sides.label[o], sides.letters[o]));
  };
  for (const auto& m : sides.ops[kA].path_to(key_of_code(c.a_used))) push(kA, m);
  for (const auto& m : sides.ops[kB].path_to(key_of_code(c.b_used))) push(kB, m);
  plan.a_used = cur[kA];
  plan.b_used = cur[kB];
  plan.product = product;
  PlanStep s;
  s.kind = StepKind::contract;
  s.operand = kC;
  s.tensor = sides.label[kC];
  s.before = s.after = product;
  s.local_before = s.local_after = local_shape(mesh, product, art.out_shape);
  s.global = art.out_shape;
  s.flops = c.flops;
  s.reason = product.is_partial() ? "local product; each is a partial sum over " + axes_text(product.partial)
                                    : "local product; every term of each sum is on this device";
  plan.steps.push_back(std::move(s));
  for (const auto& m : result_moves) push(kC, m);
  return plan;
}

}  // namespace shardlab::search_detail
