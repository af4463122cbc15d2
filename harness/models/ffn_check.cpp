#include "harness/models/ffn_check.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "harness/check/gradient_check.hpp"
#include "harness/check/program_check.hpp"
#include "harness/plan/gradient.hpp"

namespace shardlab {

bool exact_in_eighths(double abs_sum, DType t, bool in_compute) {
  return 8.0 * abs_sum < 1.0 / (in_compute ? compute_roundoff(t) : unit_roundoff(t));
}

FfnGroups ffn_reduction_groups(const FfnPlan& plan) {
  FfnGroups g;
  for (const auto& s : plan.stages) {
    if (s.kind != FfnStage::Kind::contraction) continue;
    std::size_t n = 1;
    for (const auto& st : s.plan.steps)
      if (st.kind == StepKind::reduce_scatter || st.kind == StepKind::all_reduce)
        n *= static_cast<std::size_t>(plan.mesh.axes_size(st.axes));
    // A result left as partial sums would be reduced later: count every device then.
    if (s.out_spec.is_partial()) n = static_cast<std::size_t>(plan.mesh.devices());
    std::size_t* slot = s.out == "h" ? &g.h : s.out == "y" ? &g.y : s.out == "dg" ? &g.dg
                        : s.out == "dW_out" ? &g.dw_out : s.out == "dx" ? &g.dx : s.out == "dW_in" ? &g.dw_in : nullptr;
    if (slot) *slot = std::max(*slot, n);
  }
  return g;
}

TensorProgram ffn_tensor_program(const FfnDims& d) {
  TensorProgram p;
  p.name = "ffn";
  p.sizes = {{'b', d.b}, {'s', d.s}, {'m', d.m}, {'h', d.h}};
  p.inputs = {{"x", "bsm"}, {"W_in", "mh"}, {"W_out", "hm"}};
  p.ops = {make_op("h", "einsum", {"x", "W_in"}, "bsm,mh->bsh"), make_op("g", "gelu", {"h"}),
           make_op("y", "einsum", {"g", "W_out"}, "bsh,hm->bsm")};
  p.outputs = {"y"};
  return make_program(std::move(p));
}

std::vector<Verdict> ffn_full_checks(const FfnPlan& plan, const std::map<std::string, Tensor>& inputs,
                                     const std::map<std::string, Tensor>& got) {
  const FfnConfig& c = plan.config;
  const TensorProgram forward = ffn_tensor_program(c.dims);
  const GradientProgram g = c.backward ? gradient_program(forward) : GradientProgram{};
  const TensorProgram& p = c.backward ? g.program : forward;
  const FfnGroups n = ffn_reduction_groups(plan);
  const std::map<std::string, std::size_t> group_of = {{"h", n.h},           {"y", n.y},   {"dg", n.dg},
                                                       {"dW_out", n.dw_out}, {"dx", n.dx}, {"dW_in", n.dw_in}};
  std::vector<int> groups;  // elementwise ops sum nothing: 1
  for (const auto& op : p.ops) {
    const auto it = group_of.find(op.out);
    groups.push_back(it == group_of.end() ? 1 : static_cast<int>(it->second));
  }
  const ProgramReference ref = checked_reference(p, inputs, c.dtype, plan.mesh.devices(), groups);
  const std::pair<const char*, const char*> labels[] = {{"y", "y vs unsharded"},
                                                        {"dx", "dx vs unsharded analytic"},
                                                        {"dW_in", "dW_in vs unsharded analytic"},
                                                        {"dW_out", "dW_out vs unsharded analytic"}};
  std::vector<Verdict> out;
  for (const auto& [name, label] : labels) {
    if (!c.backward && std::string(name) != "y") continue;
    const auto it = got.find(name);
    if (it == got.end()) throw Error(ErrorKind::device, std::string("the sharded FFN returned no ") + name);
    Verdict v = compare(label, it->second, ref.values.at(name), ref.bounds.at(name));
    v.name = label;
    out.push_back(v);
  }
  return out;
}

std::vector<Verdict> ffn_rule_checks(const FfnDims& dims, std::uint64_t seed) {
  const TensorProgram forward = ffn_tensor_program(dims);
  return central_difference_checks(forward, gradient_program(forward), seed);
}

}  // namespace shardlab
