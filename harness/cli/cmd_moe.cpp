#include "harness/cli/cmd_moe.hpp"

#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>

#include "core/error.hpp"
#include "harness/cli/cli.hpp"
#include "core/text.hpp"
#include "harness/check/session.hpp"
#include "core/table.hpp"
#include "core/write_file.hpp"
#include "harness/check/npz.hpp"
#include "harness/models/moe_io.hpp"
#include "harness/models/moe_run.hpp"

namespace shardlab {

namespace {

struct MoeOptions {
  CommonOptions common;
  MoeShape shape;
  std::string inputs;  // --inputs: x, W_router, W_in, W_out (and dy) of the user's own
  std::string save;    // --save: the outputs, gradients and routing, as .npz, after a passing run
  const CLI::Option* experts = nullptr;  // given on the command line, it must agree with --inputs
};

// The shape to run: the options', or with --inputs the arrays' (--experts, if given, must agree).
MoeShape shape_to_run(const MoeOptions& o) {
  if (o.inputs.empty()) return o.shape;
  const MoeShape s = moe_shape_of(load_arrays(o.inputs), o.shape);
  if (o.experts->count() > 0 && s.experts != o.shape.experts)
    throw Error(ErrorKind::parse, "--experts is " + std::to_string(o.shape.experts) + ", but W_router in " +
                                      o.inputs + " has " + std::to_string(s.experts) +
                                      " experts; leave --experts out with --inputs");
  return s;
}

// --save after a passing run: 0, or 3 with one sentence when the file cannot be written (the path
// was checked before the run; a full disk shows only now).
int save_arrays(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& arrays, std::ostream& out) {
  try {
    save_npz(path, arrays);
  } catch (const Error& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 3;
  }
  out << "\nSaved " << arrays.size() << " arrays to " << path << ": out, the gradients, the routing per token "
      << "(logits, experts, gates, slot), kept and routed per group, capacity and dy\n";
  return 0;
}

int run(MoeOptions o) {
  if (o.common.collectives == "native")
    throw Error(ErrorKind::parse, "shardlab moe's reference adds gradients in the ring's order; run it without "
                                  "--collectives native");
  if (o.common.collectives != "ring")
    throw Error(ErrorKind::parse, "--collectives is '" + o.common.collectives + "'; shardlab moe runs ring (ours)");
  refuse_shared_paths({{"--trace", o.common.trace}, {"--save", o.save}}, {{"--inputs", o.inputs}});
  if (!o.save.empty()) check_writable(o.save, "the .npz file");  // before anything runs
  const MoeShape s = shape_to_run(o);
  check_moe_mesh(Mesh::parse(o.common.mesh), s);  // bad numbers: one sentence, before any device starts
  Session session("moe", o.common);
  const Mesh& mesh = session.mesh();
  const std::string ep = mesh.names().back();
  auto& out = session.out();
  MoeInputs in = moe_inputs(s, o.common.seed);
  const std::string read = read_moe_inputs(o.inputs, in, session.dtype());
  const MoeRun r = run_moe(session, s, in, !o.save.empty());
  if (!session.runtime().is_root()) return session.finish();
  out << "shardlab moe: " << s.tokens << " tokens of width " << s.model << ", " << s.experts << " experts (hidden "
      << s.hidden << ") over " << ep << " of " << mesh.text() << ",\n  top-" << s.top_k << ", capacity factor "
      << format_number(s.capacity_factor, "%g") << ": C = " << r.capacity << " slots per expert and device\n\n"
      << read << (read.empty() ? "" : "\n");
  Table devices({ep, "routed", "kept", "dropped", "vs an even share"});
  for (std::size_t d = 0; d < r.device_routed.size(); ++d)
    devices.add({std::to_string(d), format_number(r.device_routed[d], "%g"), format_number(r.device_kept[d], "%g"),
                 format_number(r.device_routed[d] - r.device_kept[d], "%g"),
                 format_number(r.device_routed[d] * r.expert_devices / r.assignments, "%.2f") + "x"});
  out << "Load by expert device:\n" << devices.text() << "  " << format_number(r.dropped, "%g") << " of "
      << format_number(r.assignments, "%g") << " assignments dropped\n\nCollectives:\n"
      << collectives_table(session.report().collectives) << "\nChecks against the unsharded MoE:\n"
      << moe_check_lines(session.report().checks, "  ");
  const bool save = !o.save.empty() && session.report().pass() && o.common.inject.empty();
  const int saved = save ? save_arrays(o.save, r.saved, out) : 0;
  if (save && saved == 0) session.report().strings["saved"] = o.save;
  return std::max(session.finish(), saved);
}

}  // namespace

Command add_moe_command(CLI::App& app) {
  auto o = std::make_shared<MoeOptions>();
  o->common.mesh = "X=2,Y=2";
  auto* c = app.add_subcommand("moe", "run a mixture-of-experts FFN with its experts split over the mesh's last axis "
                                      "(lesson 20) and verify it against the unsharded one");
  c->add_option("--mesh", o->common.mesh, "the mesh: batch over every axis, experts over the last")->capture_default_str();
  o->experts = c->add_option("--experts", o->shape.experts, "number of experts E (with --inputs: W_router's)")
                   ->capture_default_str();
  c->add_option("--top-k", o->shape.top_k, "experts per token")->capture_default_str();
  c->add_option("--capacity-factor", o->shape.capacity_factor, "slots per expert and device, in even shares")
      ->capture_default_str();
  c->add_option("--inputs", o->inputs,
                "run on your own x [T, m], W_router [m, E], W_in [E, m, h], W_out [E, h, m] and dy [T, m] (generated "
                "when absent) from a .npz or folder of NAME.npy; T, m, E and h are theirs");
  c->add_option("--save", o->save,
                "after a passing run, write out, dx, dW_router, dW_in, dW_out, the routing (logits, experts, gates, "
                "slot), kept, routed, capacity and dy as a .npz (float64)");
  add_run_options(c, o->common, "<devices>");
  c->add_option("--collectives", o->common.collectives, "ring (ours); native is refused here")->capture_default_str();
  return {c, [o] { return run(*o); }};
}

}  // namespace shardlab
