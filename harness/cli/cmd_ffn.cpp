#include "harness/cli/cmd_ffn.hpp"

#include <algorithm>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "collectives/runtime.hpp"
#include "harness/cli/cli.hpp"
#include "harness/cost/cost.hpp"
#include "core/text.hpp"
#include "harness/models/ffn.hpp"
#include "harness/cost/machine.hpp"
#include "harness/plan/plan_search.hpp"
#include "harness/plan/search_text.hpp"
#include "harness/check/session.hpp"
#include "harness/check/trace.hpp"
#include "harness/models/step_cost.hpp"
#include "harness/cli/timeout_option.hpp"
#include "harness/cli/inject_option.hpp"

namespace shardlab {

namespace {

struct FfnOptions {
  CommonOptions common;
  std::string strategy = "gspmd";
  std::string dims = "B=8,S=4,M=16,H=64";
  bool backward = false;
  bool plan_only = false;
  std::string verify = "auto";  // full | sketch | auto
  std::string preset;  // a hardware preset: also print the step's modeled time on it
  std::string machine;  // a machine.dat for the this-machine preset
};

nlohmann::ordered_json model_json(const StepCost& c, const Hardware& hw) {
  nlohmann::ordered_json j;
  j["preset"] = hw.name;
  j["element_bytes"] = hw.element_bytes;
  j["collectives"] = nlohmann::ordered_json::array();
  for (const auto& k : c.collectives)
    j["collectives"].push_back({{"phase", phase_name(k.phase)},
                                {"op", k.op},
                                {"tensor", k.tensor},
                                {"axes", k.axes},
                                {"group_size", k.group},
                                {"bytes", k.n_bytes},
                                {"seconds", k.seconds}});
  j["comm_seconds"] = c.comm_seconds;
  j["compute_seconds"] = c.compute_seconds;
  j["comm_share"] = c.share();
  return j;
}

std::string model_text(const StepCost& c, const Hardware& hw) {
  return "\nModeled on " + hw.name + " (" + hw.description + ";\nshardlab cost --sources says where the numbers "
         "come from):\n" + step_cost_text(c, hw);
}

// One-axis strategies under mpiexec get a line of one device per process.
std::string default_mesh(const FfnStrategy& s, const CommonOptions& common) {
  return ffn_default_mesh(s, line_devices(common, 4));
}

std::string specs_line(const FfnSpecs& f) {
  return f.x.notation("x", {"B", "S", "M"}) + "  " + f.w_in.notation("W_in", {"M", "H"}) + "  " +
         f.h.notation("h", {"B", "S", "H"}) + "  " + f.w_out.notation("W_out", {"H", "M"}) + "  " +
         f.y.notation("y", {"B", "S", "M"}) +
         (f.x_in != f.x ? "  (x used as " + f.x_in.text() + ")" : "") +
         (f.g_in != f.h ? "  (g used as " + f.g_in.text() + ")" : "");
}

// One line per stage: its collectives and predicted bytes per device.
std::string stages_text(const FfnPlan& p) {
  std::string out;
  int i = 1;
  for (const auto& s : p.stages) {
    std::string what;
    for (const PlanStep* c : s.collectives())
      what += (what.empty() ? "" : ", ") + step_kind_name(c->kind) + " " + c->tensor + " over " +
              axes_text(c->axes) + " (" + std::to_string(c->predicted_bytes) + " B)";
    out += "  " + std::to_string(i++) + ". " + phase_name(s.phase) + "  " + s.title + "  -> " +
           s.out_spec.text() + ": " + (what.empty() ? "no messages" : what) + "\n";
  }
  return out;
}

// For each contraction, the search's plan with the same operand specs and output spec: a line
// wherever it sends fewer bytes than the strategy's plan (the strategy keeps its own layouts).
std::string cheaper_stages_text(const FfnPlan& p) {
  std::string out;
  for (const auto& s : p.stages) {
    if (s.kind != FfnStage::Kind::contraction || (s.phase == FfnPhase::backward && !p.config.backward)) continue;
    const Plan& mine = s.plan;
    const SearchResult found = search_contraction(mine.eq, p.mesh, mine.a, mine.b, mine.out_spec,
                                                  {false, mine.result_name, mine.element_bytes});
    const std::size_t ours = mine.predicted_bytes_per_device(), best = found.best.predicted_bytes_per_device();
    if (best >= ours) continue;
    std::vector<std::string> steps;
    for (const auto& st : found.best.steps)
      if (st.kind != StepKind::contract) steps.push_back(step_kind_name(st.kind) + " " + st.tensor + " over " + axes_text(st.axes));
    out += "  " + s.title + ": " + std::to_string(best) + " B per device instead of " + std::to_string(ours) + " (" +
           times_text(double(ours), double(best)) + " less)\n      " + join(steps, ", ") + "\n";
  }
  return out.empty() ? "  none: every contraction's plan already sends the fewest bytes for its specs\n" : out;
}

nlohmann::ordered_json plan_json(const FfnPlan& p) {
  nlohmann::ordered_json j;
  j["case"] = "ffn";
  j["plan_only"] = true;
  j["strategy"] = p.strategy.name;
  j["dims"] = ffn_dims_text(p.config.dims);
  nlohmann::ordered_json mesh = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < p.mesh.names().size(); ++i) mesh[p.mesh.names()[i]] = p.mesh.sizes()[i];
  j["mesh"] = mesh;
  j["collectives"] = nlohmann::ordered_json::array();
  for (FfnPhase ph : {FfnPhase::forward, FfnPhase::backward})
    for (const PlanStep* c : p.collectives(ph))
      j["collectives"].push_back({{"phase", phase_name(ph)},
                                  {"op", step_kind_name(c->kind)},
                                  {"axes", axes_text(c->axes)},
                                  {"tensor", c->tensor},
                                  {"predicted_bytes_per_device", c->predicted_bytes}});
  j["predicted_bytes_per_device"] = p.predicted_bytes_per_device();
  j["peak_memory_per_device"] = p.peak_bytes_per_device;
  j["stored_memory_per_device"] = p.stored_bytes_per_device;
  j["unsharded_peak_memory"] = p.unsharded_peak_bytes;
  j["unsharded_stored_memory"] = p.unsharded_stored_bytes;
  j["flops_per_device"] = p.flops_per_device();
  j["unsharded_flops"] = p.unsharded_flops();
  return j;
}

// The mesh with the --uneven rule (a Session sets it too; --plan-only and the memory check come first).
Mesh uneven_mesh(const CommonOptions& common) {
  Mesh mesh = Mesh::parse(common.mesh);
  mesh.set_uneven(parse_uneven(common.uneven));
  return mesh;
}

int run(const FfnOptions& o) {
  CommonOptions common = o.common;
  const FfnStrategy& strategy = ffn_strategy(o.strategy);
  if (common.mesh.empty()) common.mesh = default_mesh(strategy, common);
  FfnConfig config;
  config.strategy = o.strategy;
  config.dims = parse_ffn_dims(o.dims);
  config.backward = o.backward;
  config.seed = common.seed;
  config.dtype = parse_dtype(common.dtype);
  config.verify = parse_verify_mode(o.verify);
  // A bad name or machine file: exit 2 now. --machine alone models the step on this machine.
  const std::vector<Hardware> presets = presets_with_machine(o.machine);
  const std::string preset = o.preset.empty() && !o.machine.empty() ? "this-machine" : o.preset;
  const Hardware* hw = preset.empty() ? nullptr : &hardware_preset(preset, presets);

  if (o.plan_only) {  // no devices: the planner's predictions alone
    refuse_trace_without_run(common.trace, "--plan-only");
    const FfnPlan p = plan_ffn(uneven_mesh(common), config);
    if (!process_is_root() || common.quiet) return 0;  // no run, so no verdict line to print
    if (common.json) {
      auto j = plan_json(p);
      if (hw) j["model"] = model_json(ffn_step_cost(p, config.backward, *hw), *hw);
      std::cout << j.dump(2) << std::endl;
      return 0;
    }
    std::cout << "shardlab ffn --plan-only: " << p.strategy.name << " on mesh " << p.mesh.text() << ", dims "
              << ffn_dims_text(p.config.dims) << "\n  " << specs_line(p.specs) << "\n"
              << ffn_plan_text(p) << "  predicted bytes per device: forward "
              << p.predicted_bytes_per_device(FfnPhase::forward) << ", backward "
              << p.predicted_bytes_per_device(FfnPhase::backward) << "\n  memory per device: held "
              << p.stored_bytes_per_device << " bytes, peak " << p.peak_bytes_per_device
              << "; unsharded held " << p.unsharded_stored_bytes << ", peak " << p.unsharded_peak_bytes << "\n";
    if (hw) std::cout << model_text(ffn_step_cost(p, config.backward, *hw), *hw);
    return 0;
  }

  // Up front, before any tensor: every device here at its peak, plus the full tensors in float64.
  refuse_ffn_over_memory(plan_ffn(uneven_mesh(common), config), config,
                         common.backend == "mpi" ? 1 : Mesh::parse(common.mesh).devices());
  Session session("ffn", common);
  const FfnPlan preview = plan_ffn(session.mesh(), config);  // bad specs fail here, before any output
  auto& out = session.out();
  out << "shardlab ffn: strategy " << strategy.name << " (" << strategy.description << "; " << strategy.source
      << ")\n  mesh " << session.mesh().text() << ", dims " << ffn_dims_text(config.dims) << ", "
      << (config.backward ? "forward and backward (L = sum(y * R))" : "forward") << "\n";
  if (!strategy.rules.empty()) out << "  rules " << mapping_text(ffn_rules(strategy, session.mesh())) << "\n";
  out << "  specs " << specs_line(preview.specs) << "\n\nStages (each contraction planned from the specs):\n"
      << stages_text(preview)
      << "Where the planner's search finds a cheaper plan for a stage (same specs in and out; not run):\n"
      << cheaper_stages_text(preview);

  const FfnResult r = run_ffn(session, config);
  ffn_report_fields(r, session.report());
  if (!session.runtime().is_root()) return session.runtime().agree(0);

  out << "\nCollectives (measured by the ledger, predicted by the planner):\n" << ffn_collectives_table(r)
      << "  forward: " << r.forward_collectives << " collective(s), "
      << r.plan.predicted_bytes_per_device(FfnPhase::forward) << " bytes/device";
  if (config.backward)
    out << "; backward: " << r.collectives.size() - r.forward_collectives << " collective(s), "
        << r.plan.predicted_bytes_per_device(FfnPhase::backward) << " bytes/device";
  out << "\n\nMemory and work:\n" << ffn_memory_text(r);
  if (hw) out << model_text(ffn_step_cost(preview, config.backward, *hw), *hw);
  out << "\nChecks (" << r.verify << " verification):\n";
  for (const auto& v : r.checks) out << "  " << v.name << ": " << v.line() << "\n";
  bool differences = false;
  for (const auto& v : r.checks) differences = differences || v.name.find("central differences") != std::string::npos;
  out << "  time: inputs " << format_number(r.seconds_inputs, "%.2f") << " s, sharded run " << format_number(r.seconds_run, "%.2f")
      << " s, verification " << format_number(r.seconds_verify, "%.2f") << " s\n";
  if (config.backward && !differences)
    out << "  (central differences skipped: each runs the whole layer twice; use small --dims to check them)\n";

  if (!common.json) return session.finish();
  // The report's JSON plus the phase of every collective; bfloat16's checks covered by their
  // replays first, as finish() does for the text report.
  session.cover_replays();
  int status = session.report().pass() ? 0 : 1;
  auto j = nlohmann::ordered_json::parse(report_json(session.report()));
  j["backward"] = config.backward;
  j["verify"] = r.verify;
  j["seconds_inputs"] = r.seconds_inputs;
  j["seconds_run"] = r.seconds_run;
  j["seconds_verify"] = r.seconds_verify;
  if (hw) j["model"] = model_json(ffn_step_cost(preview, config.backward, *hw), *hw);
  for (std::size_t i = 0; i < j["collectives"].size(); ++i)
    j["collectives"][i]["phase"] = i < r.forward_collectives ? "forward" : "backward";
  std::cout << j.dump(2) << std::endl;
  return session.runtime().agree(std::max(status, session.keep_trace()));
}

}  // namespace

Command add_ffn_command(CLI::App& app) {
  auto o = std::make_shared<FfnOptions>();
  auto* c = app.add_subcommand("ffn",
                               "run the Transformer FFN y = gelu(x W_in) W_out under one sharding strategy, forward "
                               "and (--backward) backward, and check it against the unsharded layer");
  c->add_option("--strategy", o->strategy, ffn_strategy_names())->capture_default_str();
  c->add_option("--mesh", o->common.mesh,
                "device mesh (default: X=2,Y=4 for gspmd, Y=4 for column|row|pairwise|row_column, X=4 for data; "
                "a one-axis default under mpiexec takes one device per process)");
  c->add_option("--dims", o->dims, "B=..,S=..,M=..,H=.. (batch, sequence, embed, hidden; dims left out keep their defaults), or 'article' for "
                                   "B=8,S=512,M=5120,H=20480 (--plan-only is instant)")
      ->capture_default_str();
  c->add_flag("--backward", o->backward, "also the backward pass of L = sum(y * R): dx, dW_in, dW_out");
  c->add_flag("--plan-only", o->plan_only, "print the derived plan, bytes and memory per device without running");
  c->add_option("--preset", o->preset,
                "also model the step's time on a hardware preset (shardlab cost lists them): each collective, "
                "communication against compute, and its share");
  c->add_option("--machine", o->machine,
                "the this-machine preset's figures from this machine.dat (shardlab sweep --what machine writes it); "
                "without --preset, model the step on it");
  add_collective_timeout(c, o->common.collective_timeout);
  c->add_option("--backend", o->common.backend, "sim (threads, default) or mpi (run under mpiexec)")
      ->capture_default_str();
  c->add_option("--collectives", o->common.collectives, "ring (ours) or native (MPICH's own; mpi backend)")
      ->capture_default_str();
  c->add_option("--seed", o->common.seed, "seed for generated inputs")->capture_default_str();
  c->add_option("--dtype", o->common.dtype, "element type stored and moved: float32, float64 or bfloat16")
      ->capture_default_str();
  c->add_option("--verify", o->verify,
                "full (the unsharded layer, every element), sketch (each stage by random projections) or auto "
                "(full up to 5e10 unsharded FLOPs)")
      ->capture_default_str();
  c->add_flag("--json", o->common.json, "print one JSON object instead of the text report");
  c->add_flag("--quiet", o->common.quiet, "print only the verdict line");
  c->add_option("--trace", o->common.trace, "also write the run's timeline here (Chrome Trace JSON; open in ui.perfetto.dev)");
  add_inject_option(c, o->common);
  add_uneven_option(c, o->common.uneven);
  return {c, [o] { return run(*o); }};
}

}  // namespace shardlab
