#include "harness/cli/cmd_moe.hpp"

#include <memory>

#include <CLI/CLI.hpp>

#include "core/error.hpp"
#include "harness/cli/cli.hpp"
#include "core/text.hpp"
#include "harness/check/session.hpp"
#include "core/table.hpp"
#include "harness/models/moe_run.hpp"

namespace shardlab {

namespace {

struct MoeOptions {
  CommonOptions common;
  MoeShape shape;
};

int run(MoeOptions o) {
  if (o.common.collectives == "native")
    throw Error(ErrorKind::parse, "shardlab moe's reference adds gradients in the ring's order; run it without "
                                  "--collectives native");
  if (o.common.collectives != "ring")
    throw Error(ErrorKind::parse, "--collectives is '" + o.common.collectives + "'; shardlab moe runs ring (ours)");
  const MoeShape& s = o.shape;
  check_moe_mesh(Mesh::parse(o.common.mesh), s);  // bad numbers: one sentence, before any device starts
  Session session("moe", o.common);
  const Mesh& mesh = session.mesh();
  const std::string ep = mesh.names().back();
  auto& out = session.out();
  const MoeRun r = run_moe(session, s, moe_inputs(s, o.common.seed));
  if (!session.runtime().is_root()) return session.finish();
  out << "shardlab moe: " << s.tokens << " tokens, " << s.experts << " experts over " << ep << " of " << mesh.text()
      << ",\n  top-" << s.top_k << ", capacity factor " << format_number(s.capacity_factor, "%g") << ": C = "
      << r.capacity << " slots per expert and device\n\n";
  Table devices({ep, "routed", "kept", "dropped", "vs an even share"});
  for (std::size_t d = 0; d < r.device_routed.size(); ++d)
    devices.add({std::to_string(d), format_number(r.device_routed[d], "%g"), format_number(r.device_kept[d], "%g"),
                 format_number(r.device_routed[d] - r.device_kept[d], "%g"),
                 format_number(r.device_routed[d] * r.expert_devices / r.assignments, "%.2f") + "x"});
  out << "Load by expert device:\n" << devices.text() << "  " << format_number(r.dropped, "%g") << " of "
      << format_number(r.assignments, "%g") << " assignments dropped\n\nCollectives:\n"
      << collectives_table(session.report().collectives) << "\nChecks against the unsharded MoE:\n"
      << moe_check_lines(session.report().checks, "  ");
  return session.finish();
}

}  // namespace

Command add_moe_command(CLI::App& app) {
  auto o = std::make_shared<MoeOptions>();
  o->common.mesh = "X=2,Y=2";
  auto* c = app.add_subcommand("moe", "run a mixture-of-experts FFN with its experts split over the mesh's last axis "
                                      "(lesson 20) and verify it against the unsharded one");
  c->add_option("--mesh", o->common.mesh, "the mesh: batch over every axis, experts over the last")->capture_default_str();
  c->add_option("--experts", o->shape.experts, "number of experts E")->capture_default_str();
  c->add_option("--top-k", o->shape.top_k, "experts per token")->capture_default_str();
  c->add_option("--capacity-factor", o->shape.capacity_factor, "slots per expert and device, in even shares")
      ->capture_default_str();
  add_run_options(c, o->common, "<devices>");
  c->add_option("--collectives", o->common.collectives, "ring (ours); native is refused here")->capture_default_str();
  return {c, [o] { return run(*o); }};
}

}  // namespace shardlab
