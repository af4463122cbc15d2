#include "harness/cli/cmd_nested.hpp"

#include <algorithm>
#include <memory>

#include <CLI/CLI.hpp>

#include "core/error.hpp"
#include "core/table.hpp"
#include "core/text.hpp"
#include "harness/check/session.hpp"
#include "harness/cli/cli.hpp"
#include "harness/jobs/nested.hpp"
#include "harness/models/case_run.hpp"

namespace shardlab {

namespace {

struct NestedOptions {
  CommonOptions common;
  NestedShape shape;
};

// Which axis does what in each part of the model, the article's decoder named though not run.
std::string roles_text(const Mesh& mesh) {
  const std::string X = "X (" + std::to_string(mesh.axis_size("X")) + ")", Y = "Y (" + std::to_string(mesh.axis_size("Y")) + ")";
  Table t({"part", X, Y, "moves"});
  for (const NestedPart& p : nested_parts()) t.add({p.name, p.x_job, p.y_job, p.moves});
  return t.text() + "  (the article's decoder, dense layers in stages over X with the batch over Y, is not run)\n";
}

// The encoder on the mesh: each device's stage (its layers) and experts.
std::string encoder_picture(const Mesh& mesh, const NestedShape& s) {
  const int per_stage = s.layers / mesh.axis_size("X"), El = s.experts / mesh.axis_size("Y");
  return mesh.picture([&](int d) {
    const auto k = mesh.coords(d);
    const int l0 = k[0] * per_stage, e0 = k[1] * El;
    const std::string layers = per_stage == 1 ? "L" + std::to_string(l0) : "L" + std::to_string(l0) + "-" + std::to_string(l0 + per_stage - 1);
    return layers + " e" + std::to_string(e0) + (El > 1 ? "-" + std::to_string(e0 + El - 1) : "");
  });
}

int run(NestedOptions o) {
  if (o.common.collectives != "ring")
    throw Error(ErrorKind::parse, "--collectives is '" + o.common.collectives + "'; shardlab nested runs ring (ours)");
  const NestedShape& s = o.shape;
  check_nested(s, Mesh::parse(o.common.mesh));  // bad numbers: one sentence, before any device starts
  Session session("nested", o.common);
  const Mesh& mesh = session.mesh();
  auto& out = session.out();
  const NestedInputs in = nested_inputs(s, o.common.seed);
  const RunResult run = session.run(nested_program(s, in));
  if (!session.runtime().is_root()) return session.finish();
  const NestedReference ref = nested_reference(s, in, mesh, session.dtype());
  const std::size_t C = nested_capacity(s, mesh);
  Report& report = session.report();
  for (const Verdict& v : nested_checks(s, mesh, run, ref, session.element_bytes())) report.checks.push_back(v);
  report.numbers["capacity"] = static_cast<double>(C);
  report.numbers["dropped"] = ref.dropped;
  report.numbers["assignments"] = ref.assignments;

  const int X = mesh.axis_size("X"), Y = mesh.axis_size("Y");
  out << "shardlab nested: article 002's nested mesh " << mesh.text() << " as one model, forward only.\n  "
      << s.batch << " tokens, vocabulary " << s.vocab << ", width " << s.model << "; the encoder: " << s.layers
      << " MoE layers on " << X << " stages,\n  " << s.experts << " experts (hidden " << s.hidden << ") over Y, top-"
      << s.top_k << ", capacity factor " << format_number(s.capacity_factor, "%g") << ": C = " << C
      << " slots per expert and group\n  of " << s.batch / static_cast<std::size_t>(X * Y) << " tokens; "
      << format_number(ref.dropped, "%g") << " of " << format_number(ref.assignments, "%g")
      << " assignments dropped. Micro-batch c is the embedding's batch block c.\n\n"
      << "Which axis does what in each part:\n" << roles_text(mesh)
      << "\nThe encoder on the mesh (each device's layers L and experts e):\n" << encoder_picture(mesh, s)
      << "\nBytes each part moved (ledger, " << dtype_text(session.dtype()) << "):\n"
      << nested_bytes_table(s, mesh, run, session.element_bytes(), report.numbers)
      << "\nChecks against the unsharded model (the whole batch through every layer on one device):\n";
  for (const Verdict& v : report.checks) out << "  " << v.name << ": " << check_text(v) << "\n";
  return session.finish();
}

}  // namespace

Command add_nested_command(CLI::App& app) {
  auto o = std::make_shared<NestedOptions>();
  o->common.mesh = "X=4,Y=4";
  auto* c = app.add_subcommand("nested", "run article 002's nested mesh as one model: embedding and softmax with the "
                                         "batch over X and vocabulary over Y, an MoE encoder in stages over X with "
                                         "experts over Y (forward), checked against the unsharded model");
  c->add_option("--mesh", o->common.mesh, "the mesh, axes X and Y")->capture_default_str();
  c->add_option("--batch", o->shape.batch, "tokens in the batch")->capture_default_str();
  c->add_option("--vocab", o->shape.vocab, "vocabulary size")->capture_default_str();
  c->add_option("--model", o->shape.model, "width between layers")->capture_default_str();
  c->add_option("--hidden", o->shape.hidden, "each expert's hidden width")->capture_default_str();
  c->add_option("--experts", o->shape.experts, "experts in each MoE layer")->capture_default_str();
  c->add_option("--top-k", o->shape.top_k, "experts per token")->capture_default_str();
  c->add_option("--capacity-factor", o->shape.capacity_factor, "slots per expert and group, in even shares")
      ->capture_default_str();
  c->add_option("--layers", o->shape.layers, "MoE layers in the encoder, split evenly over the X stages")
      ->capture_default_str();
  add_run_options(c, o->common, "<devices>");
  c->add_option("--collectives", o->common.collectives, "ring (ours); native is refused here")->capture_default_str();
  return {c, [o] { return run(*o); }};
}

}  // namespace shardlab
