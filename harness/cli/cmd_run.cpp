#include "harness/cli/cmd_run.hpp"

#include <algorithm>
#include <iostream>
#include <memory>
#include <set>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "core/wrap.hpp"
#include "core/layout.hpp"
#include "harness/check/case_file.hpp"
#include "harness/check/session.hpp"
#include "harness/check/trace.hpp"
#include "core/write_file.hpp"
#include "harness/cost/cost.hpp"
#include "harness/models/case_run.hpp"
#include "harness/models/program_cost.hpp"
#include "harness/plan/keep_gathered.hpp"
#include "harness/plan/plan_search.hpp"
#include "harness/plan/search_text.hpp"
#include "harness/plan/program_explain.hpp"
#include "harness/cli/timeout_option.hpp"
#include "harness/cli/inject_option.hpp"
#include "harness/check/npz.hpp"

namespace shardlab {

namespace {

struct RunOptions {
  CommonOptions common;
  std::string file;
  bool explain = false;
  bool plan_only = false;
  std::string preset;  // also print the modeled time by part on this hardware preset
  double memory_limit = kCaseLimitGiB;
  std::string dtype;  // "": the case's own element type
  std::string uneven;  // "": the case's own rule
  std::string inputs;  // --inputs: a .npz or folder of NAME.npy, in place of the file's inputs_from
  std::string save;    // --save: the outputs, gradients and reference, as .npz, after a passing run
};

// --save, after the run passed: 0, or 3 with one sentence when the file cannot be written (the
// path was checked before the run; a full disk shows only now).
int save_run(const std::string& path, const CaseRun& r, std::ostream& out) {
  try {
    save_npz(path, r.saved);
  } catch (const Error& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 3;
  }
  out << "Saved " << r.saved.size() << " arrays to " << path
      << ": the outputs (and gradients) as the devices computed them, the upstream gradients, and ref/ the unsharded "
         "reference's\n";
  return 0;
}

// --preset: the modeled communication and compute by part, beside a source's measured shares.
std::string model_text(const CaseFile& c, const ProgramPlan& plan, const Hardware& hw) {
  std::string out = "\nModeled time by part (shardlab run --preset " + hw.name + "):\n" +
                    program_cost_text(program_cost(plan, hw), hw, c.measured_share);
  if (!c.measured_share.empty())
    out += "  measured: " + c.measured_source + ".\n  A measured share also counts data formatting, and XLA "
           "overlaps and reorders work; the model\n  counts only collectives and matmul FLOPs, one after another.\n";
  return out;
}

nlohmann::ordered_json model_json(const ProgramPlan& plan, const Hardware& hw);

// A plan_only case without --plan-only: the plan, and the file's expectations held to it, with a
// verdict (exit 0 or 1). Nothing runs and no tensor is built.
// Dims that do not divide their mesh axes (a case file's uneven = "chunk" or "pad"): each
// distinct split once, with the rows (heads, tokens ...) every device holds and, under pad, its
// rows of padding ("6:7+1"). Empty when every split divides.
std::string uneven_blocks_text(const ProgramPlan& plan) {
  const Mesh& mesh = plan.mesh;
  std::string out;
  std::set<std::string> seen;
  for (const auto& t : plan.program.tensors()) {
    const Spec& spec = plan.propagation.specs.at(t).spec;
    const std::string& letters = plan.program.dims.at(t);
    const Shape shape = plan.program.shape(t);
    for (std::size_t d = 0; d < spec.rank() && d < shape.size(); ++d) {
      const std::size_t n = static_cast<std::size_t>(spec.shards(mesh, d));
      const std::string key = std::string(1, letters[d]) + "/" + axes_text(spec.dims[d]);
      if (shape[d] % n == 0 || !seen.insert(key).second) continue;
      out += "  dim " + std::string(1, letters[d]) + " (" + std::to_string(shape[d]) + ") over " +
             axes_text(spec.dims[d]) + ", first in " + t + ":";
      for (int dev = 0; dev < mesh.devices(); ++dev) {
        const DimBlock b = dim_block(mesh, spec, shape, d, dev);
        const std::size_t padding = b.stored - (b.stop - b.start);
        out += (dev % 8 == 0 ? "\n   " : "") + std::string(" d") + std::to_string(dev) + " " +
               (b.stop > b.start ? std::to_string(b.start) + ":" + std::to_string(b.stop) : std::string("none")) +
               (padding ? "+" + std::to_string(padding) : std::string()) + (dev + 1 < mesh.devices() ? "," : "");
      }
      out += "\n";
    }
  }
  if (out.empty()) return out;
  return mesh.uneven() == Uneven::pad
             ? "Uneven blocks (uneven = \"pad\": ceil(d/n) each, real rows then +zeros, cut axis by axis over "
               "several axes; every op but an einsum reads only the real rows):\n" + out + "\n"
             : "Uneven blocks (uneven = \"chunk\": ceil(d/n) each, the last ones shorter, as torch.chunk):\n" + out + "\n";
}

int run_plan_only_case(const CaseFile& c, const ProgramPlan& plan, const CommonOptions& common, const Hardware* hw) {
  const CaseRun r = check_plan(c, plan);
  bool pass = true;
  for (const auto& v : r.checks) pass = pass && v.pass;
  if (!process_is_root()) return pass ? 0 : 1;
  if (common.json) {
    nlohmann::ordered_json j = {{"case", c.program.name}, {"file", c.path}, {"plan_only", true}, {"pass", pass},
                                {"expected_collectives", r.collectives},
                                {"predicted_bytes_per_device", r.bytes_per_device},
                                {"predicted_peak_memory_per_device", r.peak_bytes}};
    j["checks"] = nlohmann::ordered_json::array();
    for (const auto& v : r.checks) j["checks"].push_back({{"name", v.name}, {"pass", v.pass}, {"detail", v.detail}});
    if (hw) j["model"] = model_json(plan, *hw);
    std::cout << j.dump(2) << std::endl;
    return pass ? 0 : 1;
  }
  if (!common.quiet) {
    std::cout << "shardlab run: " << c.program.name << " (" << c.path << ") is plan_only: planned, not run\n\n"
              << case_plan_text(c, plan) << (hw ? model_text(c, plan, *hw) : "") << "\nChecks (against the plan):\n";
    for (const auto& v : r.checks) std::cout << "  " << v.name << ": " << check_text(v) << "\n";
  }
  std::cout << (pass ? "PASS " : "FAIL ") << c.program.name << " (planned, not run; "
            << checks_power_phrase(r.checks, parse_dtype(c.dtype)) << ")\n";
  return pass ? 0 : 1;
}

nlohmann::ordered_json model_json(const ProgramPlan& plan, const Hardware& hw) {
  nlohmann::ordered_json parts = nlohmann::ordered_json::array();
  for (const auto& p : program_cost(plan, hw))
    parts.push_back({{"part", p.part}, {"collectives", p.collectives}, {"comm_seconds", p.comm_seconds},
                     {"compute_seconds", p.compute_seconds}, {"comm_share", p.share()}});
  return {{"preset", hw.name}, {"parts", parts}};
}

// A backward case: keep_gathered's trade-off, from the case planned the other way too.
KeepTradeOff keep_of(const CaseFile& c, const ProgramPlan& plan) {
  if (!c.backward) return {};
  CaseFile other = c;
  other.keep_gathered = !c.keep_gathered;
  const ProgramPlan alt = plan_case(other, plan.mesh);
  return c.keep_gathered ? keep_trade_off(alt, plan) : keep_trade_off(plan, alt);
}

std::string keep_text(const CaseFile& c, const ProgramPlan& plan) {
  const std::string t = keep_gathered_text(keep_of(c, plan), c.keep_gathered);
  return t.empty() ? t : "\n" + t;
}

nlohmann::ordered_json keep_json(const CaseFile& c, const ProgramPlan& plan) {
  const KeepTradeOff t = keep_of(c, plan);
  return {{"keep_gathered", c.keep_gathered}, {"bytes_per_device_regather", t.bytes_regather},
          {"bytes_per_device_keep", t.bytes_keep}, {"saved_bytes_per_device", t.saved()},
          {"held_bytes_per_device", t.held()}, {"peak_regather", t.peak_regather}, {"peak_keep", t.peak_keep}};
}

// --explain: each moved tensor's layout, why, and what the others would cost; then every einsum's
// search, the articles' plan and the rejected ones.
std::string explanations(const ProgramPlan& plan) {
  std::string out = "\n" + program_explain_text(plan) + "\nEach einsum's plan search:\n";
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
  parse_memory_limit(o.memory_limit);  // a bad limit: exit 2 before anything runs
  const Hardware* hw = o.preset.empty() ? nullptr : &hardware_preset(o.preset);  // a bad name: exit 2 now
  refuse_shared_paths({{"--trace", o.common.trace}, {"--save", o.save}}, {{"the case file", o.file}, {"--inputs", o.inputs}});
  if (!o.save.empty()) check_writable(o.save, "the .npz file");  // before anything runs
  const CaseFile c = with_uneven(o.dtype.empty() ? read_case_file(o.file, o.inputs)
                                                 : with_dtype(read_case_file(o.file, o.inputs), o.dtype),
                                 o.uneven);
  if (!o.save.empty()) refuse_shared_paths({{"--save", o.save}}, {{"inputs_from", c.inputs_from}});
  if (!o.save.empty() && (o.plan_only || c.plan_only))
    throw Error(ErrorKind::parse, "--save writes a run's outputs, and " +
                                      std::string(o.plan_only ? "--plan-only" : "a plan_only case") + " runs nothing");
  const CommonOptions common = case_options(c, o.common);
  if (o.plan_only || c.plan_only) {
    refuse_trace_without_run(common.trace, o.plan_only ? "--plan-only" : "a plan_only case file");
    Mesh mesh = Mesh::parse(c.mesh);
    mesh.set_uneven(parse_uneven(c.uneven));
    const ProgramPlan plan = plan_case(c, mesh);
    if (!o.plan_only) return run_plan_only_case(c, plan, common, hw);
    if (!process_is_root() || common.quiet) return 0;
    if (common.json) {
      nlohmann::ordered_json j = {{"case", c.program.name}, {"file", c.path}, {"mesh", plan.mesh.text()},
                                  {"expected_collectives", plan.collective_lines()},
                                  {"predicted_bytes_per_device", plan.predicted_bytes_per_device()},
                                  {"predicted_peak_memory_per_device", predicted_peak_bytes(plan)}};
      if (hw) j["model"] = model_json(plan, *hw);
      if (c.backward) j["gathered_activations"] = keep_json(c, plan);
      std::cout << j.dump(2) << std::endl;
      return 0;
    }
    std::cout << wrap_lines("shardlab run --plan-only: " + c.program.name + " (" + c.path + ") on mesh " +
                                plan.mesh.text() + "\n\n" + case_plan_text(c, plan) + uneven_blocks_text(plan) +
                                keep_text(c, plan) +
                                (o.explain ? explanations(plan) : "") + (hw ? model_text(c, plan, *hw) : ""),
                            100, Hang::last_column);
    return 0;
  }
  Session session(c.program.name, common);
  const ProgramPlan plan = plan_case(c, session.mesh());  // bad annotations fail here, before any output
  refuse_case_over_memory(c, plan, common.backend == "mpi" ? 1 : session.mesh().devices(),
                          parse_memory_limit(o.memory_limit));
  auto& out = session.out();
  out << "shardlab run: " << c.program.name << " (" << c.path << ") on mesh " << session.mesh().text() << ", "
      << dtype_text(session.dtype()) << ", seed " << c.seed << "\n\n" << case_plan_text(c, plan) << uneven_blocks_text(plan)
      << keep_text(c, plan) << (o.explain ? explanations(plan) : "") << (hw ? model_text(c, plan, *hw) : "");
  const CaseRun r = run_case(session, c, plan, true, !o.save.empty());
  Report& report = session.report();
  report.weak_fails = c.allow_weak.empty();
  report.checks.insert(report.checks.end(), r.checks.begin(), r.checks.end());
  report.checks.insert(report.checks.end(), r.rule_checks.begin(), r.rule_checks.end());
  report.numbers["peak_memory_per_device"] = static_cast<double>(r.peak_bytes);
  report.numbers["predicted_peak_memory_per_device"] = static_cast<double>(r.predicted_peak_bytes);
  report.numbers["annotated_tensors"] = plan.propagation.annotated;
  report.numbers["tensors"] = static_cast<double>(plan.propagation.specs.size());
  if (!session.runtime().is_root()) return session.runtime().agree(0);
  if (!r.inputs_used.source.empty()) out << "\n" << r.inputs_used.text();
  out << "\nCollectives (measured by the ledger, predicted by the plan):\n" << collectives_table(report.collectives)
      << "  " << r.bytes_per_device << " bytes sent per device (the busiest); peak " << r.peak_bytes
      << " bytes held per device (planned " << r.predicted_peak_bytes << ")\n\nChecks:\n";
  auto line = [&](const Verdict& v) {
    out << "  " << v.name << ": " << check_text(v) << "\n";
    if (is_weak(v, session.dtype())) out << "    " << weak_text(v, session.dtype()) << "\n";
  };
  for (const auto& v : r.checks) line(v);
  if (!r.rule_checks.empty()) {
    out << "Gradient rules (the derivation, not this layout: float64 central differences of the unsharded\n"
           "program on inputs of their own):\n";
    for (const auto& v : r.rule_checks) line(v);
  }
  if (!c.allow_weak.empty()) out << "WEAK checks are accepted in this case: " << c.allow_weak << "\n";
  // The element that sets the weakest output check's power: on a user's values, where to look.
  const auto weakest = std::max_element(r.power_limits.begin(), r.power_limits.end(),
                                        [](const PowerLimit& a, const PowerLimit& b) { return a.power < b.power; });
  if (weakest != r.power_limits.end() && weakest->power > 0)
    out << wrap_lines("Power set by " + weakest->text() + " (tolerances follow the values' own magnitudes)", 100,
                      Hang::last_column) << "\n";
  const bool save = !o.save.empty() && report.pass() && o.common.inject.empty();
  const int saved = save ? save_run(o.save, r, out) : 0;
  if (!common.json) return std::max(session.finish(), saved);
  auto j = nlohmann::ordered_json::parse(report_json(report));
  j["file"] = c.path;
  j["specs"] = nlohmann::ordered_json::object();
  for (const auto& name : plan.program.tensors()) {
    const auto& s = plan.propagation.specs.at(name);
    j["specs"][name] = {{"spec", s.spec.text()}, {"origin", s.origin}};
  }
  j["expected_collectives"] = plan.collective_lines();
  if (c.backward) j["gathered_activations"] = keep_json(c, plan);
  if (hw) j["model"] = model_json(plan, *hw);
  if (!r.inputs_used.source.empty())
    j["inputs"] = {{"source", r.inputs_used.source}, {"read", r.inputs_used.read}, {"generated", r.inputs_used.generated},
                   {"unused", r.inputs_used.unused}};
  j["power_limits"] = nlohmann::ordered_json::array();
  for (const auto& l : r.power_limits)
    j["power_limits"].push_back({{"tensor", l.tensor}, {"index", l.index}, {"power", l.power}, {"tolerance", l.tolerance},
                                 {"error", l.error}, {"value", l.value}, {"rms", l.rms}});
  if (save && saved == 0) j["saved"] = o.save;
  std::cout << j.dump(2) << std::endl;
  return std::max(saved, session.runtime().agree(std::max(report.pass() ? 0 : 1, session.keep_trace())));
}

}  // namespace

Command add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto* c = app.add_subcommand("run",
                               "run one case file (TOML): propagate its annotations, plan every op, run it, verify "
                               "it against the unsharded program and check its expectations");
  c->add_option("file", o->file, "the case file, e.g. harness/cases/gspmd_ffn.toml")->required();
  add_collective_timeout(c, o->common.collective_timeout);
  c->add_option("--backend", o->common.backend, "sim (threads, default) or mpi (run under mpiexec)")
      ->capture_default_str();
  c->add_option("--collectives", o->common.collectives, "ring (ours) or native (MPICH's own; mpi backend)")
      ->capture_default_str();
  c->add_flag("--explain", o->explain,
              "also why each moved tensor lies where it does and what its other layouts would cost, then each "
              "einsum's search: the articles' plan and the rejected ones");
  c->add_flag("--plan-only", o->plan_only, "print the program, the specs and the plan without running");
  c->add_option("--memory-limit", o->memory_limit, "GiB the run may use (default 1: a case is checked in seconds)");
  c->add_option("--dtype", o->dtype,
                "run in this element type (float32|float64|bfloat16) instead of the file's; [expect]'s byte and "
                "memory limits scale with the element's size");
  c->add_option("--uneven", o->uneven,
                "a dim that does not divide its mesh axes, instead of the file's rule (default chunk): chunk "
                "(as torch.chunk), pad (as JAX) or none (refuse it)");
  c->add_option("--inputs", o->inputs,
                "read the inputs from a .npz or a folder of NAME.npy (float16, bfloat16, float32, float64), in place "
                "of the file's inputs_from; inputs it does not name are generated");
  c->add_option("--save", o->save,
                "after a passing run, write its outputs, every input's gradient (backward), the upstream gradients "
                "d<output> and ref/<name> the unsharded reference's, as a .npz (float64)");
  c->add_option("--preset", o->preset, "also model the time by part on a hardware preset (shardlab cost --presets)");
  c->add_flag("--json", o->common.json, "print one JSON object instead of the text report");
  c->add_flag("--quiet", o->common.quiet, "print only the verdict line");
  c->add_option("--trace", o->common.trace, "also write the run's timeline here (Chrome Trace JSON; open in ui.perfetto.dev)");
  add_inject_option(c, o->common);
  return {c, [o] { return run(*o); }};
}

}  // namespace shardlab
