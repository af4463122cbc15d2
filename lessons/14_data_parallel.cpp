// Lesson 14 - data parallelism: one training step with the batch split (article 004).
//
// One idea: with the batch split over N devices and every weight whole on each, the forward and
// backward passes need no communication at all; each device's weight gradient is the sum over its
// own examples only. One AllReduce of every weight gradient adds them up, so every device holds
// the full-batch gradient, takes the same optimizer step, and ends with the same weights - equal
// to the unsharded step. The AllReduce sends 2(n-1)/n of the gradients' bytes per device.
//
// The model is the FFN as a program; its backward is derived by rule (harness/plan/gradient.hpp)
// and an SGD step W_next = W - lr dW is appended to it. L = sum(y * R) over the whole batch, so the
// summed gradients are the full-batch gradient (a mean loss would divide both by the batch).
//
// Run:    build/bin/14_data_parallel [--mesh X=8] [--json]
//         mpiexec -n 8 build/bin/14_data_parallel --backend mpi
// Prints: the mesh; the step as a program; each device's slice of the batch; the collectives with
//         bytes per device against 2(n-1)/n of the gradients; the verdict for y, the gradients
//         and the updated weights (identical on every device) against the unsharded step.
#include <string>
#include <vector>

#include "collectives/predict.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "harness/check/pictures.hpp"
#include "harness/check/program_check.hpp"
#include "harness/check/session.hpp"
#include "core/table.hpp"
#include "harness/check/verify.hpp"
#include "harness/cli/cli.hpp"
#include "harness/models/case_run.hpp"
#include "harness/plan/gradient.hpp"
#include "harness/plan/program_plan.hpp"

using namespace shardlab;

namespace {

const char* kModel = R"(dims = { b = 16, s = 4, m = 16, h = 64 }
inputs = { x = "bsm", W_in = "mh", W_out = "hm" }
ops = [
  { out = "h", op = "einsum", eq = "bsm,mh->bsh", in = ["x", "W_in"] },
  { out = "g", op = "gelu", in = ["h"] },
  { out = "y", op = "einsum", eq = "bsh,hm->bsm", in = ["g", "W_out"] },
]
outputs = ["y"]
)";

constexpr double kLearningRate = 0.125;  // a power of two: the step rounds like the reference's

// Appends W_next = W - lr dW for each weight to the gradient program, as outputs.
TensorProgram with_sgd_step(GradientProgram& g, const std::vector<std::string>& weights) {
  TensorProgram p = g.program;
  for (const auto& w : weights) {
    std::string dw;
    for (const auto& [x, d] : g.grads)
      if (x == w) dw = d;
    ProgramOp step, next;
    step.out = "step_" + w, step.name = "scale", step.in = {dw}, step.value = kLearningRate, step.has_value = true;
    next.out = w + "_next", next.name = "sub", next.in = {w, step.out};
    p.ops.push_back(step);
    p.ops.push_back(next);
    p.outputs.push_back(next.out);
  }
  return make_program(p);
}

}  // namespace

int main(int argc, char** argv) {
  Cli cli("14_data_parallel", "Lesson 14: one data-parallel training step, the batch split over every device", "X=8");
  cli.uneven_option();  // a mesh the batch (or the rows) does not divide
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    Session session("14_data_parallel", cli.common);
    const Mesh& mesh = session.mesh();
    const std::string all = mesh.rank() == 1 ? mesh.names()[0] : "(" + join(mesh.names(), ",") + ")";
    const int n = mesh.devices();
    auto& out = session.out();
    out << "1. Mesh " << mesh.text() << ": " << n << " devices, each a data-parallel replica.\n"
        << mesh.picture() << "\n";

    CaseFile c = layout_case(kModel, "shard = { x = \"" + all + ",_,_\", W_in = \"_,_\", W_out = \"_,_\" }", "data_step",
                             session, cli.common.seed);
    const Propagation forward = propagate(c.program, mesh, c.shard);
    GradientProgram g = gradient_program(c.program);
    g.program = with_sgd_step(g, {"W_in", "W_out"});
    const Propagation prop = gradient_propagation(g, mesh, forward);
    const ProgramPlan plan = plan_tensor_program(g.program, mesh, prop, session.dtype(), false, g.forward_ops);

    out << "2. The step as one program: the FFN, its backward derived by rule, an SGD step (lr "
        << format_number(kLearningRate, "%g") << "):\n" << program_text(g.program) << "\n";
    const Shape xs = c.program.shape("x");
    out << "3. The batch split, the weights whole on every device:\n   "
        << layout_summary(mesh, prop.specs.at("x").spec, xs, "x", {"B", "S", "M"}) << "\n   "
        << layout_summary(mesh, prop.specs.at("W_in").spec, c.program.shape("W_in"), "W_in", {"M", "H"}) << "\n\n";

    const auto inputs = program_inputs(g.program, cli.common.seed);
    const RunResult run = session.run(program_spmd(plan, inputs));
    if (!session.runtime().is_root()) return session.finish();

    Report& report = session.report();
    const ProgramReference ref = checked_reference(g.program, inputs, session.dtype(), mesh.devices(),
                                               partial_groups(plan), on_partial_sums(plan));
    for (const auto& name : g.program.outputs)
      report.checks.push_back(verify_output(mesh, prop.specs.at(name).spec, run, name,
                                            ref.values.at(name),
                                            ref.bounds.at(name)));
    // Only the weight gradients move: 2 (n-1)/n of each, in the element type.
    const std::size_t eb = session.element_bytes();
    std::size_t params = 0;
    for (const char* w : {"W_in", "W_out"}) params += element_count(c.program.shape(w));
    Table t({"collective", "tensor", "bytes/device", "2(n-1)/n of its bytes"});
    std::size_t sent = 0;
    Verdict formula;
    formula.name = "each AllReduce sends 2(n-1)/n of its gradient's bytes";
    for (const auto& s : report.collectives) {
      const std::size_t bytes = element_count(c.program.shape(s.tensor == "dW_in" ? "W_in" : "W_out")) * eb;
      // The ring's formula (collectives/predict.hpp): n chunks, the first e % n one longer, the
      // busiest device's; 2(n-1)/n of the bytes when n divides the elements.
      const std::size_t want = predicted_bytes_sent("all_reduce", n, bytes, eb);
      t.add({s.op, s.tensor, std::to_string(s.bytes_per_device), std::to_string(want)});
      formula.pass = formula.pass && s.op == "all_reduce" && s.bytes_per_device == want;
      sent += s.bytes_per_device;
    }
    formula.pass = formula.pass && report.collectives.size() == (n > 1 ? 2u : 0u);
    report.checks.push_back(formula);
    report.numbers["bytes_per_device"] = static_cast<double>(sent);
    report.numbers["parameter_bytes"] = static_cast<double>(params * eb);
    out << "4. Communication: nothing forward, nothing for dx; one AllReduce per weight gradient:\n"
        << (report.collectives.empty() ? "   (none: one device)\n" : t.text()) << "   " << sent << " bytes per device for "
        << params * eb << " bytes of parameters: 2(n-1)/n = " << format_number(2.0 * (n - 1) / n, "%.3f")
        << " of them,\n   with n = " << n << " devices in the AllReduce's group.\n\n";

    out << "5. Verdict against the unsharded step (y, the gradients, the updated weights):\n";
    for (const auto& v : report.checks) out << "   " << v.name << ": " << check_text(v) << "\n";
    out << "   The updated weights are compared replica by replica: every device holds the same W_next.\n"
        << "\nTakeaway: data parallelism needs no communication until the gradients, then one AllReduce of\n"
           "          all of them - 2(n-1)/n of the parameters' bytes per device, whatever the batch.\n"
           "Next:     build/bin/shardlab zero --params 7.5B --devices 64\n"
           "          what each device must hold, and how ZeRO splits it.\n"
           "Exercise: build/bin/shardlab exercise --lesson 14\n";
    return session.finish();
  });
}
