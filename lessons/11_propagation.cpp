// Lesson 11 - sharding propagation: annotate three tensors, derive the rest (article 002, GSPMD).
//
// One idea: a user should not have to write a spec for every tensor. GSPMD asks for a few
// annotations - the input x and the two weights - and passes specs along the ops: an einsum's output
// dims take the axes their letters have in its operands, an elementwise op keeps its input's layout,
// a tensor with an annotated tensor's dims takes its layout. Then every op is planned from the specs
// it meets. The FFN written as a program of three ops, with x, W_in and W_out annotated, comes out
// with h, g and y laid out as lesson 08 wrote them by hand, and with the same four collectives.
//
// Run:    build/bin/11_propagation [--mesh X=2,Y=4] [--dims b=8,s=4,m=16,h=64] [--json]
//         mpiexec -n 8 build/bin/11_propagation --backend mpi
// Prints: the program; the three annotations; every tensor's propagated spec and where it came
//         from; the plan of each op; the collectives measured beside lesson 08's; what annotating x
//         alone would derive and cost; the verdict against the unsharded program.
#include <map>
#include <string>

#include "core/error.hpp"
#include "core/text.hpp"
#include "harness/check/program_check.hpp"
#include "harness/check/session.hpp"
#include "harness/check/table.hpp"
#include "harness/check/verify.hpp"
#include "harness/cli/cli.hpp"
#include "harness/models/case_run.hpp"
#include "harness/plan/program_plan.hpp"
#include "harness/plan/propagate.hpp"

using namespace shardlab;

namespace {

TensorProgram ffn_program(const std::string& dims) {
  TensorProgram p;
  p.name = "ffn";
  p.sizes = parse_dim_sizes(dims);
  p.inputs = {{"x", "bsm"}, {"W_in", "mh"}, {"W_out", "hm"}};
  ProgramOp up, act, down;
  up.out = "h", up.name = "einsum", up.eq = "bsm,mh->bsh", up.in = {"x", "W_in"};
  act.out = "g", act.name = "gelu", act.in = {"h"};
  down.out = "y", down.name = "einsum", down.eq = "bsh,hm->bsm", down.in = {"g", "W_out"};
  p.ops = {up, act, down};
  p.outputs = {"y"};
  return make_program(p);
}

}  // namespace

int main(int argc, char** argv) {
  Cli cli("11_propagation", "Lesson 11: annotate x, W_in and W_out; propagation derives the rest (GSPMD)", "X=2,Y=4");
  std::string dims = "b=8,s=4,m=16,h=64";
  cli.option("--dims", dims, "dim sizes b=..,s=..,m=..,h=.. (batch, sequence, embed, hidden)");
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    Session session("11_propagation", cli.common);
    const Mesh& mesh = session.mesh();
    if (mesh.rank() != 2) throw Error(ErrorKind::parse, "lesson 11 needs a 2-axis mesh like X=2,Y=4, not " + mesh.text());
    const std::string X = mesh.names()[0], Y = mesh.names()[1];
    const TensorProgram p = ffn_program(dims);
    // Lesson 08's layout: batch on X, embed on Y for activations, the weights' embed on X, hidden on Y.
    const std::map<std::string, std::string> annotations = {
        {"x", X + ",_," + Y}, {"W_in", X + "," + Y}, {"W_out", Y + "," + X}};
    const Propagation prop = propagate(p, mesh, annotations);
    const ProgramPlan plan = plan_program_ops(p, mesh, prop, session.dtype());

    auto& out = session.out();
    out << "1. The FFN as a program of three ops over named dims (b batch, s sequence, m embed, h hidden):\n"
        << program_text(p) << "\n";
    out << "2. Three annotations, as a user writes them (lesson 08's layout for x and the weights):\n";
    for (const auto& [t, s] : annotations) out << "     " << t << " = " << s << "\n";
    out << "\n3. Propagation gives every other tensor a spec, and says where it came from:\n"
        << propagation_text(p, prop)
        << "   h: b takes " << X << " from x, h takes " << Y << " from W_in; m is summed away. g = gelu(h) keeps h's.\n"
        << "   y has x's dims, so it takes x's layout: the layer's output can be added back to its input.\n\n";
    out << "4. Each op planned from the specs it meets (the search, fewest bytes):\n" << program_plan_text(plan) << "\n";

    const auto inputs = program_inputs(p, cli.common.seed);
    const RunResult run = session.run(program_spmd(plan, inputs));

    // What annotating x alone would give: the weights are derived back through the einsums.
    const Propagation lone = propagate(p, mesh, {{"x", annotations.at("x")}});
    const ProgramPlan lone_plan = plan_program_ops(p, mesh, lone, session.dtype());
    if (!session.runtime().is_root()) return session.finish();

    Report& report = session.report();
    const ProgramReference ref = run_reference(p, inputs, session.dtype(), mesh.devices(), partial_groups(plan));
    report.checks.push_back(verify_output(mesh, prop.specs.at("y").spec, run, "y",
                                                  session.expected(ref.values.at("y"), ref.bounds.at("y")), ref.bounds.at("y")));
    std::vector<std::string> ran;
    for (const auto& c : report.collectives) ran.push_back(c.op + " " + c.tensor + " over " + c.axes);
    // Lesson 08's four, less those over an axis of size 1 (they move nothing, and the search makes no step).
    std::vector<std::string> lesson08;
    for (const auto& [c, axis] : std::vector<std::pair<std::string, std::string>>{
             {"all_gather x over ", Y}, {"all_gather W_in over ", X}, {"all_gather W_out over ", X}, {"reduce_scatter y over ", Y}})
      if (mesh.axis_size(axis) > 1) lesson08.push_back(c + axis);
    Verdict same;
    same.name = "the same collectives as lesson 08";
    same.pass = ran == lesson08;
    if (!same.pass) same.detail = "ran " + join(ran, "; ") + ", lesson 08 makes " + join(lesson08, "; ");
    report.checks.push_back(same);
    report.numbers["annotated_tensors"] = prop.annotated;
    report.numbers["tensors"] = static_cast<double>(prop.specs.size());

    out << "5. Communication, measured by the ledger, beside lesson 08's hand-written plan:\n"
        << collectives_table(report.collectives);
    Table t({"#", "this lesson (propagated)", "lesson 08 (written by hand)"});
    for (std::size_t i = 0; i < std::max(ran.size(), lesson08.size()); ++i)
      t.add({std::to_string(i + 1), i < ran.size() ? ran[i] : "-", i < lesson08.size() ? lesson08[i] : "-"});
    out << t.text() << "\n";

    out << "6. Annotate x alone and propagation derives the weights from the einsums instead:\n";
    for (const char* w : {"W_in", "W_out"})
      out << "     " << w << " = " << lone.specs.at(w).spec.text() << "  (" << lone.specs.at(w).origin << ")\n";
    out << "   which costs " << lone_plan.predicted_bytes_per_device() << " bytes per device in "
        << lone_plan.collective_lines().size() << " collectives (" << join(lone_plan.collective_lines(), "; ")
        << ")\n   against " << plan.predicted_bytes_per_device()
        << " with the weights annotated: the annotations are where a user says what must stay split.\n\n";

    out << "7. Verdict against the unsharded program:\n";
    for (const auto& v : report.checks) out << "   " << v.name << ": " << check_text(v) << "\n";
    out << "   " << prop.annotated << " of " << prop.specs.size()
        << " tensors of the forward program were annotated; the rest were derived. (The backward program's\n"
           "   tensors will be counted here once shardlab derives gradients.)\n"
        << "\nTakeaway: annotate the inputs and weights; propagation lays out every other tensor and the planner\n"
           "          derives the collectives - here exactly the four lesson 08 wrote by hand.\n"
           "Next:     shardlab run harness/cases/gspmd_ffn.toml - the same program as a case file, for CI.\n";
    return session.finish();
  });
}
