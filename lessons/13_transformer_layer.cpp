// Lesson 13 - a whole Transformer layer, sharded two ways (articles 001, 002 and 003).
//
// One idea: a layer is layer norm, attention, a residual add, layer norm, the FFN and another
// residual add, and each part brings its own communication. In article 001's 2D layout the
// activations are split along the embed dim, so each layer norm's mean and variance are partial
// sums that must be all-reduced, and every matmul gathers its weight's blocks. In the Megatron
// layout (article 003) the activations are whole on every device and heads and the FFN's hidden
// dim are split: each sublayer costs one AllReduce forward and one backward, four in all.
//
// The layer is one program; its backward is derived by rule (harness/plan/gradient.hpp); each
// layout is a set of annotations. Every collective is traced back to the op that needs it.
//
// Run:    build/bin/13_transformer_layer [--mesh X=2,Y=4] [--json]
//         mpiexec -n 8 build/bin/13_transformer_layer --backend mpi
// Prints: the mesh; the layer as a program; the specs of its main tensors in both layouts; where
//         each collective comes from, by pass and sublayer, with bytes per device; the verdict
//         of each layout against the unsharded layer and central differences.
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/text.hpp"
#include "harness/check/case_file.hpp"
#include "harness/check/session.hpp"
#include "core/table.hpp"
#include "harness/cli/cli.hpp"
#include "harness/models/case_run.hpp"
#include "harness/models/transformer_layer.hpp"

using namespace shardlab;

namespace {

struct Layout {
  std::string name, what, shard;  // shard lines; A and B stand for the mesh's two axes
};

const std::vector<Layout> kLayouts = {
    {"gspmd_2d", "article 001's rules: batch->A, heads->B, embed_kernel->A, embed->B",
     "x = \"A,_,B\"\nW_q = \"A,B,_\"\nW_k = \"A,B,_\"\nW_v = \"A,B,_\"\nW_o = \"B,_,A\"\nW_in = \"A,B\"\nW_out = \"B,A\"\n"},
    {"megatron", "heads and hidden over all devices; x and the layer norms whole on each",
     "x = \"_,_,_\"\nW_q = \"_,(A,B),_\"\nW_k = \"_,(A,B),_\"\nW_v = \"_,(A,B),_\"\nW_o = \"(A,B),_,_\"\n"
     "W_in = \"_,(A,B)\"\nW_out = \"(A,B),_\"\n"},
};

}  // namespace

int main(int argc, char** argv) {
  Cli cli("13_transformer_layer", "Lesson 13: a Transformer layer in the 2D and the Megatron layouts", "X=2,Y=4");
  cli.inputs_option();  // --inputs FILE.npz: named input tensors read from it
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    Session session("13_transformer_layer", cli.common);
    const Mesh& mesh = session.mesh();
    if (mesh.rank() != 2) throw Error(ErrorKind::parse, "lesson 13 needs a 2-axis mesh like X=2,Y=4, not " + mesh.text());
    const std::string A = mesh.names()[0], B = mesh.names()[1];
    auto& out = session.out();
    out << "1. Mesh " << mesh.text() << ":\n" << mesh.picture() << "\n";

    std::vector<CaseFile> cases;
    std::vector<ProgramPlan> plans;
    for (const auto& l : kLayouts) {
      cases.push_back(layout_case(transformer_layer_text(), "[shard]\n" + l.shard, "layer_" + l.name, session, cli.common.seed));
      plans.push_back(plan_case(cases.back(), mesh));
    }
    const TensorProgram& forward = cases[0].program;
    const std::size_t forward_ops = forward.ops.size();
    out << "2. The layer as a program of " << forward_ops << " ops (b batch, s queries, t keys, m embed, n heads,\n"
        << "   d head size, h hidden); its backward, " << plans[0].program.ops.size() - forward_ops
        << " more ops, is derived by rule:\n"
        << program_text(forward) << "\n";

    out << "3. Two layouts; propagation gives every other tensor its spec:\n";
    Table specs({"tensor", "dims", "gspmd_2d", "megatron"});
    for (const char* t : {"x", "mu1", "a", "W_q", "q", "scores", "att", "W_in", "h", "y"}) {
      std::vector<std::string> row = {t, forward.dims.at(t)};
      for (const auto& p : plans) row.push_back(p.propagation.specs.at(t).spec.text());
      specs.add(row);
    }
    out << specs.text();
    for (const auto& l : kLayouts) out << "   " << l.name << ": " << with_mesh_axes(l.what, mesh) << "\n";
    out << "\n";

    std::vector<CaseRun> runs;
    // The gradient rules against central differences are the program's, not a layout's: once.
    for (std::size_t i = 0; i < cases.size(); ++i) {
      session.name_runs(kLayouts[i].name);  // --json: each collective says which layout ran it
      runs.push_back(run_case(session, cases[i], plans[i], i == 0));
    }
    if (!session.runtime().is_root()) return session.finish();

    Report& report = session.report();
    out << "4. Where each collective comes from (the ledger's rows, in run order, by pass and sublayer):\n";
    for (std::size_t i = 0; i < runs.size(); ++i) {
      // (pass, part) -> how many of each collective, and their bytes; first seen first.
      std::vector<std::pair<std::string, std::map<std::string, int>>> groups;
      std::map<std::string, std::size_t> bytes;
      std::vector<std::string> norms;
      for (const auto& o : plans[i].ops) {
        const ProgramOp& op = plans[i].program.ops[o.op];
        const std::string pass = o.op < forward_ops ? "forward" : "backward";
        const std::string key = pass + " " + op.part;
        for (const PlanStep* s : o.collectives()) {
          if (groups.empty() || groups.back().first != key) groups.push_back({key, {}});
          groups.back().second[step_kind_name(s->kind)] += 1;
          bytes[key] += s->predicted_bytes;
          if (op.name == "mean") norms.push_back(step_kind_name(s->kind) + " " + s->tensor);
        }
      }
      Table t({"pass", "sublayer", "collectives", "bytes/device"});
      for (const auto& [key, kinds] : groups) {
        std::vector<std::string> counts;
        for (const auto& [kind, n] : kinds) counts.push_back(std::to_string(n) + " " + kind);
        const auto space = key.find(' ');
        t.add({key.substr(0, space), key.substr(space + 1), join(counts, ", "), std::to_string(bytes[key])});
      }
      out << "   " << kLayouts[i].name << ": " << runs[i].collectives.size() << " collectives, "
          << runs[i].bytes_per_device << " bytes per device, peak " << runs[i].peak_bytes << " bytes held\n"
          << t.text();
      if (!norms.empty())
        out << "   the layer norms' means and variances, over m split by " << B << ":\n     " << join(norms, ", ") << "\n";
      report.numbers[kLayouts[i].name + "_bytes_per_device"] = static_cast<double>(runs[i].bytes_per_device);
      report.numbers[kLayouts[i].name + "_collectives"] = static_cast<double>(runs[i].collectives.size());
    }
    out << "   megatron's four, one per sublayer and pass:\n     " << join(runs[1].collectives, ", ") << "\n\n";

    out << "5. Verdict against the unsharded layer (y and the 11 gradients) and central differences:\n";
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const int passed = add_layout_checks(report, kLayouts[i].name, runs[i], out);
      out << "   " << kLayouts[i].name << ": " << passed << " of " << runs[i].checks.size() << " checks pass\n";
    }
    const int rules = add_rule_checks(report, runs[0], out);
    out << "   gradient rules, once for the program (float64 central differences of the unsharded layer,\n"
        << "   on inputs of their own; the same in every layout): " << rules << " of " << runs[0].rule_checks.size()
        << " pass\n";
    Verdict four;
    const auto& ran = runs[1].collectives;
    const bool alone = session.mesh().devices() == 1;  // a group of one device sums nothing
    four.name = alone ? "megatron: on one device nothing moves" : "megatron: one AllReduce per sublayer each way";
    four.pass = ran.size() == (alone ? 0u : 4u);
    for (std::size_t k = 0; k < ran.size() && four.pass; ++k) four.pass = ran[k].rfind("all_reduce ", 0) == 0;
    if (!four.pass) four.detail = "ran " + join(ran, "; ");
    report.checks.push_back(four);
    out << "   " << four.name << ": " << check_text(four) << "\n"
        << "\nTakeaway: split the embed dim and even a layer norm communicates; keep activations whole and\n"
           "          split heads and hidden, and a layer costs four AllReduces per step.\n"
           "Next:     build/bin/shardlab run harness/cases/esm2_layer.toml --plan-only --preset tpu-v2\n"
           "          the 2D layer at ESM2 15B's size, its communication share beside article 001's trace.\n"
           "Exercise: build/bin/shardlab exercise --lesson 13\n";
    return session.finish();
  });
}
