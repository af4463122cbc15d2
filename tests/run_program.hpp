// A planned program run on the sim mesh, each output checked against the unsharded program
// (harness/check/program_check.hpp) and each collective's ledger bytes against the plan's.
#pragma once
#include <doctest/doctest.h>

#include <vector>

#include "collectives/runtime.hpp"
#include "core/layout.hpp"
#include "harness/check/program_check.hpp"
#include "harness/check/report.hpp"
#include "harness/check/verify.hpp"
#include "harness/plan/program_plan.hpp"

namespace shardlab::testing {

// The ledger's collectives, in order.
inline std::vector<CollectiveSummary> run_program_checked(const ProgramPlan& plan, DType dtype, std::uint64_t seed = 3) {
  const auto inputs = program_inputs(plan.program, seed);
  Runtime rt(Backend::sim, false, dtype);
  const RunResult run = rt.run(plan.mesh, program_spmd(plan, inputs));
  const ProgramReference ref =
      run_reference(plan.program, inputs, dtype, plan.mesh.devices(), partial_groups(plan), on_partial_sums(plan));
  for (const auto& name : plan.program.outputs) {
    std::vector<Tensor> blocks;
    for (const auto& out : run.outputs) blocks.push_back(out.at(name));
    const Assembly a = assemble(plan.mesh, plan.propagation.specs.at(name).spec, plan.program.shape(name), blocks, name);
    const Verdict v = compare(name, a.tensor, ref.values.at(name), ref.bounds.at(name));
    CAPTURE(v.line());
    CHECK(v.pass);
    CHECK(a.replicas_agree);
  }
  const auto got = summarize(run.ledger);
  const auto steps = plan.collectives();
  REQUIRE(steps.size() == got.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    CHECK(step_kind_name(steps[i]->kind) == got[i].op);
    CHECK(steps[i]->predicted_bytes == got[i].bytes_per_device);
  }
  return got;
}

}  // namespace shardlab::testing
