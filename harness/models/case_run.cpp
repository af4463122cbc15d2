#include "harness/models/case_run.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>

#include "core/layout.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/text.hpp"
#include "harness/check/gradient_check.hpp"
#include "harness/check/program_check.hpp"
#include "harness/check/rounding_check.hpp"
#include "harness/check/verify.hpp"
#include "harness/check/plan_ledger.hpp"

namespace shardlab {

namespace {

Verdict check(const std::string& name, bool pass, const std::string& detail) {
  Verdict v;
  v.name = name;
  v.pass = pass;
  v.detail = pass ? "" : detail;
  return v;
}

std::string line_of(const CaseFile& c, int line) { return c.path + (line > 0 ? ":" + std::to_string(line) : ""); }

// The ledger against the plan: the same collectives in order, each with the bytes planned.
Verdict ledger_check(const ProgramPlan& plan, const std::vector<CollectiveSummary>& run) {
  const std::string difference = steps_vs_ledger(plan.collectives(), run);
  return check("ledger matches the plan", difference.empty(), difference);
}

// The file's expectations against what a run (or, for a plan-only case, the plan) showed.
void expect_checks(const CaseFile& c, CaseRun& r) {
  const CaseExpect& e = c.expect;
  if (e.collectives) {
    const auto& want = *e.collectives;
    std::string detail;
    for (std::size_t i = 0; i < std::max(want.size(), r.collectives.size()) && detail.empty(); ++i) {
      const std::string w = i < want.size() ? want[i] : "(nothing)", got = i < r.collectives.size() ? r.collectives[i] : "(nothing)";
      if (w != got)
        detail = line_of(c, e.collectives_line) + ": collective " + std::to_string(i + 1) + " is '" + got +
                 "', the file expects '" + w + "' (" + std::to_string(r.collectives.size()) + " ran, " +
                 std::to_string(want.size()) + " expected)";
    }
    r.checks.push_back(check("expect.collectives", detail.empty(), detail));
  }
  if (e.max_bytes_per_device)
    r.checks.push_back(check("expect.max_bytes_per_device", r.bytes_per_device <= *e.max_bytes_per_device,
                             line_of(c, e.bytes_line) + ": the run sent " + std::to_string(r.bytes_per_device) +
                                 " bytes per device (the busiest), more than the " +
                                 std::to_string(*e.max_bytes_per_device) + " allowed" + e.scaled));
  if (e.max_peak_memory_per_device)
    r.checks.push_back(check("expect.max_peak_memory_per_device", r.peak_bytes <= *e.max_peak_memory_per_device,
                             line_of(c, e.memory_line) + ": a device held " + std::to_string(r.peak_bytes) +
                                 " bytes at its peak, more than the " + std::to_string(*e.max_peak_memory_per_device) +
                                 " allowed" + e.scaled));
}

}  // namespace

CommonOptions case_options(const CaseFile& c, const CommonOptions& base) {
  CommonOptions o = base;
  o.mesh = c.mesh;
  o.dtype = c.dtype;
  o.seed = c.seed;
  o.uneven = c.uneven;
  return o;
}

CaseFile with_uneven(CaseFile c, const std::string& uneven) {
  if (uneven.empty()) return c;
  if (uneven != "chunk" && uneven != "pad" && uneven != "none")
    throw Error(ErrorKind::parse, "--uneven is '" + uneven + "'; use chunk (blocks of ceil(d/n), the last shorter), pad "
                                  "(blocks of ceil(d/n), zeros after the real rows) or none (refuse such a dim)");
  c.uneven = uneven;
  return c;
}

CaseFile with_dtype(CaseFile c, const std::string& dtype) {
  DType to;
  try {
    to = parse_dtype(dtype);
  } catch (const Error& e) {
    throw Error(ErrorKind::parse, std::string("--dtype: ") + e.what());
  }
  if (dtype == c.dtype) return c;
  const std::uint64_t was = element_bytes(parse_dtype(c.dtype)), now = element_bytes(to);
  for (auto* limit : {&c.expect.max_bytes_per_device, &c.expect.max_peak_memory_per_device})
    if (*limit) **limit = **limit / was * now;
  c.expect.scaled = " (the file's limit for " + c.dtype + ", scaled to " + dtype + ")";
  c.dtype = dtype;
  return c;
}

ProgramPlan plan_case(const CaseFile& c, const Mesh& mesh) {
  Propagation prop;
  GradientProgram g;
  try {
    prop = propagate(c.program, mesh, c.shard, {}, c.auto_layouts);
  } catch (const Error& e) {
    throw Error(e.kind(), c.path + ": " + e.what());
  }
  if (c.backward) try {
      g = gradient_program(c.program);
      prop = gradient_propagation(g, mesh, prop);
    } catch (const Error& e) {
      throw Error(e.kind(), line_of(c, c.backward_line) + ": " + e.what());
    }
  ProgramPlan plan;
  try {
    plan = plan_tensor_program(c.backward ? g.program : c.program, mesh, prop, parse_dtype(c.dtype),
                               c.plan == "article", c.backward ? g.forward_ops : SIZE_MAX, c.keep_gathered);
  } catch (const Error& e) {
    throw Error(e.kind(), c.path + ": " + e.what());
  }
  plan.gradient = std::move(g);
  return plan;
}

// A case is a small program checked in seconds: a case of 128 MB of unsharded tensors (n = 100000
// in an FFN) already runs for tens of seconds, so by default a case may use at most 1 GiB however
// much the machine has; --memory-limit raises it for a real layer a user means to wait for.
double parse_memory_limit(double gib) {
  if (!(gib > 0) || !std::isfinite(gib))
    throw Error(ErrorKind::parse, "--memory-limit takes a positive number of GiB, e.g. 8, not " + format_number(gib, "%g"));
  return gib;
}

void refuse_case_over_memory(const CaseFile& c, const ProgramPlan& plan, int devices_here, double limit_gib) {
  double unsharded = 0;
  for (const auto& t : plan.program.tensors()) {
    double n = 8;
    for (std::size_t d : plan.program.shape(t)) n *= static_cast<double>(d);
    unsharded += n;
  }
  // The inputs, the reference's values, the assembled outputs and their comparison each hold about
  // the unsharded tensors once (302 MB for 128 MB of them plus 26 MB of device peaks).
  refuse_if_over_memory(4 * unsharded + devices_here * static_cast<double>(predicted_peak_bytes(plan)),
                        c.path + " (" + c.program.name + ")",
                        "check its plan with --plan-only, give smaller dims, or raise --memory-limit (GiB)",
                        limit_gib * 1024.0 * 1024 * 1024);
}

CaseRun run_case(Session& session, const CaseFile& c, const ProgramPlan& plan, bool rules, bool keep) {
  CaseRun r;
  r.plan = plan;
  r.predicted_peak_bytes = predicted_peak_bytes(plan);
  const TensorProgram& p = plan.program;
  const auto inputs = case_inputs(c, p, &r.inputs_used);
  const RunResult run = session.run(program_spmd(plan, inputs));
  if (!session.runtime().is_root()) return r;
  // This run's own rows (a session may have run other programs before).
  const std::vector<CollectiveSummary> mine = summarize(run.ledger);
  for (const auto& s : mine) r.collectives.push_back(s.op + " " + s.tensor + " over " + s.axes);
  std::map<int, std::size_t> sent;
  for (const auto& row : run.ledger) sent[row.device] += row.bytes_sent;
  for (const auto& kv : sent) r.bytes_per_device = std::max(r.bytes_per_device, kv.second);
  for (const auto& out : run.outputs) r.peak_bytes = std::max(r.peak_bytes, static_cast<std::size_t>(out.at("peak_bytes")(0)));

  const ProgramReference ref = checked_reference(p, inputs, plan.dtype, session.mesh().devices(), partial_groups(plan),
                                             on_partial_sums(plan));
  const std::map<std::string, Tensor> got = assembled_outputs(plan, run);
  for (const auto& name : p.outputs) {
    r.power_limits.push_back(power_limit(name, got.at(name), ref.values.at(name), ref.bounds.at(name)));
    Verdict v = verify_output(session.mesh(), plan.propagation.specs.at(name).spec, run, name,
                              ref.values.at(name), ref.bounds.at(name));
    const auto of = plan.gradient.gradient_of.find(name);
    v.name = name + (of == plan.gradient.gradient_of.end() ? "" : " (gradient of " + of->second + ")") +
             " against the unsharded program";
    const Tensor& want = ref.values.at(name);
    if (!std::all_of(want.begin(), want.end(), [](double e) { return std::isfinite(e); })) {  // it overflowed
      v.pass = false;
      v.overflow = true;
      v.power = -1;
      v.detail = "the unsharded program's " + name + " overflows " + dtype_name(plan.dtype) +
                 " (it holds inf or NaN); nothing is checked: scale the case's values down";
    }
    r.checks.push_back(v);
  }
  if (c.backward && rules) r.rule_checks = central_difference_checks(c.program, plan.gradient, c.seed);
  r.checks.push_back(ledger_check(plan, mine));
  if (Verdict pad = padding_check(plan, run); !pad.name.empty()) r.checks.push_back(pad);
  if (Verdict rn = rounding_check(p, ref, plan.dtype); !rn.name.empty()) r.checks.push_back(rn);
  expect_checks(c, r);
  r.checks.push_back(check("peak memory as planned", r.peak_bytes == r.predicted_peak_bytes,
                           "a device held " + std::to_string(r.peak_bytes) + " bytes at its peak; the plan says " +
                               std::to_string(r.predicted_peak_bytes)));
  cover_by_replays(r.checks, session.runtime().replays());  // bfloat16: each run against its replay
  if (keep) r.saved = saved_arrays(plan, got, inputs, ref);
  return r;
}

CaseRun check_plan(const CaseFile& c, const ProgramPlan& plan) {
  CaseRun r;
  r.plan = plan;
  r.collectives = plan.collective_lines();
  r.bytes_per_device = plan.predicted_bytes_per_device();
  r.peak_bytes = r.predicted_peak_bytes = predicted_peak_bytes(plan);
  expect_checks(c, r);
  return r;
}

std::string with_mesh_axes(const std::string& text, const Mesh& mesh) {
  std::string out;
  for (char ch : text) out += ch == 'A' ? mesh.names()[0] : ch == 'B' ? mesh.names()[1] : std::string(1, ch);
  return out;
}

CaseFile layout_case(const std::string& body, const std::string& shard, const std::string& label,
                     const Session& session, std::uint64_t seed) {
  const Mesh& mesh = session.mesh();
  const std::string text = "name = \"" + label + "\"\nmesh = \"" + mesh.text() + "\"\n" + body + "\n" +
                           with_mesh_axes(shard, mesh) + "\n";
  CaseFile c = parse_case_file(text, label, session.options().inputs);  // a lesson's --inputs
  c.seed = seed;
  c.dtype = dtype_name(session.dtype());
  return c;
}

int add_layout_checks(Report& report, const std::string& layout, const CaseRun& run, std::ostream& out) {
  int passed = 0;
  for (auto v : run.checks) {
    passed += v.pass ? 1 : 0;
    if (!v.pass) out << "   " << layout << ": " << v.name << ": " << check_text(v) << "\n";
    v.name = layout + ": " + v.name;
    report.checks.push_back(v);
  }
  return passed;
}

std::string check_text(const Verdict& v) { return v.line(); }

int add_rule_checks(Report& report, const CaseRun& run, std::ostream& out) {
  int passed = 0;
  for (auto v : run.rule_checks) {
    passed += v.pass ? 1 : 0;
    if (!v.pass) out << "   gradient rules: " << v.name << ": " << check_text(v) << "\n";
    v.name = "gradient rules: " + v.name;
    report.checks.push_back(v);
  }
  return passed;
}

bool case_passed(const CaseFile& c, const CaseRun& r, const Report& report) {
  const bool weak_fails = c.allow_weak.empty();
  for (const auto& v : r.checks)
    if (!v.pass || (weak_fails && is_weak(v, report.dtype))) return false;
  for (const auto& v : r.rule_checks)
    if (!v.pass || (weak_fails && is_weak(v, report.dtype))) return false;
  for (const auto& c : report.collectives)
    if (!c.matches()) return false;
  return true;
}

std::string case_plan_text(const CaseFile& c, const ProgramPlan& plan) {
  const int total = static_cast<int>(plan.propagation.specs.size());
  const std::string program =
      c.backward ? "Program, forward then the backward derived by rule (L = sum of each output times R):\n" +
                       program_text(plan.program)
                 : "Program:\n" + program_text(plan.program);
  return program + "\nSpecs (" + std::to_string(plan.propagation.annotated) +
         " of " + std::to_string(total) + " tensors annotated; the rest propagated):\n" +
         propagation_text(plan.program, plan.propagation) + "\nPlan (each op from its operands' specs to its output's):\n" +
         program_plan_text(plan) + "  predicted: " + std::to_string(plan.predicted_bytes_per_device()) +
         " bytes sent per device in " + std::to_string(plan.collective_lines().size()) + " collectives; peak " +
         std::to_string(predicted_peak_bytes(plan)) + " bytes held per device\n";
}

}  // namespace shardlab
