#include "harness/cli/cmd_run.hpp"

#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "harness/check/case_file.hpp"
#include "harness/check/session.hpp"
#include "harness/models/case_run.hpp"
#include "harness/plan/plan_search.hpp"

namespace shardlab {

namespace {

struct RunOptions {
  CommonOptions common;
  std::string file;
  bool explain = false;
  bool plan_only = false;
};

// --explain: every einsum's search, the articles' plan and the rejected ones.
std::string explanations(const ProgramPlan& plan) {
  std::string out;
  for (const auto& o : plan.ops) {
    if (!o.has_contraction) continue;
    const ProgramOp& op = plan.program.ops[o.op];
    const Plan& c = o.contraction;
    PlanOptions options{false, op.out, c.element_bytes};
    const SearchResult r = search_contraction(c.eq, plan.mesh, c.a, c.b, c.out_spec, options);
    out += "\n" + op_label(plan.program, o.op) + ":\n" + explain_text(r);
  }
  return out;
}

int run(const RunOptions& o) {
  const CaseFile c = read_case_file(o.file);
  const CommonOptions common = case_options(c, o.common);
  if (o.plan_only) {
    const ProgramPlan plan = plan_case(c, Mesh::parse(c.mesh));
    if (!process_is_root() || common.quiet) return 0;
    std::cout << "shardlab run --plan-only: " << c.program.name << " (" << c.path << ") on mesh " << plan.mesh.text()
              << "\n\n" << case_plan_text(c, plan) << (o.explain ? explanations(plan) : "");
    return 0;
  }
  Session session(c.program.name, common);
  const ProgramPlan plan = plan_case(c, session.mesh());  // bad annotations fail here, before any output
  auto& out = session.out();
  out << "shardlab run: " << c.program.name << " (" << c.path << ") on mesh " << session.mesh().text() << ", "
      << dtype_text(session.dtype()) << ", seed " << c.seed << "\n\n" << case_plan_text(c, plan)
      << (o.explain ? explanations(plan) : "");
  const CaseRun r = run_case(session, c, plan);
  Report& report = session.report();
  report.checks.insert(report.checks.end(), r.checks.begin(), r.checks.end());
  report.numbers["peak_memory_per_device"] = static_cast<double>(r.peak_bytes);
  report.numbers["predicted_peak_memory_per_device"] = static_cast<double>(r.predicted_peak_bytes);
  report.numbers["annotated_tensors"] = plan.propagation.annotated;
  report.numbers["tensors"] = static_cast<double>(plan.propagation.specs.size());
  if (!session.runtime().is_root()) return session.runtime().agree(0);
  out << "\nCollectives (measured by the ledger, predicted by the plan):\n" << collectives_table(report.collectives)
      << "  " << r.bytes_per_device << " bytes sent per device (the busiest); peak " << r.peak_bytes
      << " bytes held per device (planned " << r.predicted_peak_bytes << ")\n\nChecks:\n";
  for (const auto& v : r.checks) out << "  " << v.name << ": " << check_text(v) << "\n";
  if (!common.json) return session.finish();
  auto j = nlohmann::ordered_json::parse(report_json(report));
  j["file"] = c.path;
  j["specs"] = nlohmann::ordered_json::object();
  for (const auto& name : plan.program.tensors()) {
    const auto& s = plan.propagation.specs.at(name);
    j["specs"][name] = {{"spec", s.spec.text()}, {"origin", s.origin}};
  }
  j["expected_collectives"] = plan.collective_lines();
  std::cout << j.dump(2) << std::endl;
  return session.runtime().agree(report.pass() ? 0 : 1);
}

}  // namespace

Command add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto* c = app.add_subcommand("run",
                               "run one case file (TOML): propagate its annotations, plan every op, run it, verify "
                               "it against the unsharded program and check its expectations");
  c->add_option("file", o->file, "the case file, e.g. harness/cases/gspmd_ffn.toml")->required();
  c->add_option("--backend", o->common.backend, "sim (threads, default) or mpi (run under mpiexec)")
      ->capture_default_str();
  c->add_flag("--explain", o->explain, "also each einsum's search: the articles' plan and the rejected ones");
  c->add_flag("--plan-only", o->plan_only, "print the program, the specs and the plan without running");
  c->add_flag("--json", o->common.json, "print one JSON object instead of the text report");
  c->add_flag("--quiet", o->common.quiet, "print only the verdict line");
  c->add_flag("--perturb-expected", o->common.perturb_expected,
              "testing: add 1 to one element of each expected output; the verdict must be FAIL");
  return {c, [o] { return run(*o); }};
}

}  // namespace shardlab
