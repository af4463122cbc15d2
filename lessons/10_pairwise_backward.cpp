// Lesson 10 - the backward pass of column, row and pairwise sharding (article 003).
//
// One idea: the gradient of Y = X A with respect to X is dY A^T. Transposing A turns its columns
// into rows, so a weight cut by columns for the forward matmul is cut by rows for the backward one,
// and the other way round: a column-wise layer gathers going forward and all-reduces going back; a
// row-wise layer all-reduces forward and gathers back. In the pairwise FFN, Y = gelu(X A) B with A
// by columns and B by rows, both flips line up again: one AllReduce forward, one backward, and
// the weight gradients land split exactly like the weights, with no message at all.
//
// The loss is L = sum(Y * R) for a fixed R, so dL/dY = R. The gradients are computed sharded,
// stitched together and compared with the unsharded analytic ones, which are checked in turn
// against central finite differences in float64.
//
// Run:    build/bin/10_pairwise_backward [--mesh Y=4] [--dims B=8,S=4,M=16,H=64] [--json]
//         mpiexec -n 4 build/bin/10_pairwise_backward --backend mpi
// Prints: the mesh; the backward formulas; the unsharded gradients against finite differences;
//         each weight's cut forward and backward (the flip); the collectives forward and backward
//         of the three layouts with bytes per device; the verdicts for y, dX, dA and dB.
#include <cctype>

#include "core/error.hpp"
#include "harness/cli/cli.hpp"
#include "harness/models/ffn.hpp"
#include "harness/check/pictures.hpp"
#include "harness/check/session.hpp"
#include "harness/check/table.hpp"

using namespace shardlab;

namespace {

const Plan& plan_for(const FfnPlan& p, const std::string& result) {
  for (const auto& s : p.stages)
    if (s.kind == FfnStage::Kind::contraction && s.out == result) return s.plan;
  throw Error(ErrorKind::unsupported, "the plan has no contraction producing " + result);
}

// How a contraction uses its weight (operand B): cut along a summed dim (row-wise: partial sums)
// or along a dim of the result (column-wise: whole outputs, a slice each).
std::string cut(const Plan& p) {
  for (std::size_t i = 0; i < p.b.spec.rank(); ++i) {
    if (p.b.spec.dims[i].empty()) continue;
    const char c = p.eq.b[i];
    const bool summed = p.eq.contracted().find(c) != std::string::npos;
    return std::string(summed ? "row-wise, " : "column-wise, ") + static_cast<char>(std::toupper(c)) +
           (summed ? " summed" : " kept");
  }
  return "replicated";
}

std::string ops(const FfnPlan& p, FfnPhase phase) {
  std::string out;
  for (const PlanStep* s : p.collectives(phase)) out += (out.empty() ? "" : " + ") + step_kind_name(s->kind) + " " + s->tensor;
  return out.empty() ? "none" : out;
}

}  // namespace

int main(int argc, char** argv) {
  Cli cli("10_pairwise_backward", "Lesson 10: gradients of column, row and pairwise sharding", "Y=4");
  std::string dims_flag = "B=8,S=4,M=16,H=64";
  cli.option("--dims", dims_flag, "B=..,S=..,M=..,H=.. (X is [B*S tokens, M], A is [M, H], B is [H, M]; dims left out keep their defaults)");
  cli.mesh_follows_processes("Y");  // mpiexec -n 8 ... --backend mpi: a line of 8
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    Session session("10_pairwise_backward", cli.common);
    const Mesh& mesh = session.mesh();
    FfnConfig config;
    config.dtype = session.dtype();
    config.dims = parse_ffn_dims(dims_flag);
    config.seed = cli.common.seed;
    config.backward = true;
    config.finite_differences = false;  // once below, for the unsharded layer all three share
    config.perturb_expected = cli.common.perturb_expected;
    const std::vector<std::string> strategies = {"column", "row", "pairwise"};
    std::vector<FfnPlan> plans;
    for (const auto& s : strategies) {  // checks a one-axis mesh and the dims before anything prints
      config.strategy = s;
      plans.push_back(plan_ffn(mesh, config));
      refuse_ffn_over_memory(plans.back(), config, cli.common.backend == "mpi" ? 1 : mesh.devices());
    }

    auto& out = session.out();
    out << "1. Mesh " << mesh.text() << ": a line of " << mesh.devices() << " devices.\n" << mesh.picture() << "\n";
    out << "2. The layer and its gradients (A = W_in, B = W_out), with dY = dL/dY = R:\n"
           "     forward    H = X A       G = gelu(H)            Y = G B\n"
           "     backward   dG = dY B^T   dB = G^T dY            (B used transposed)\n"
           "                dH = dG * gelu'(H)                   (elementwise, like GELU)\n"
           "                dX = dH A^T   dA = X^T dH            (A used transposed)\n";
    const FfnDims& d = config.dims;
    const Shape as{d.m, d.h}, bs{d.h, d.m};
    Table specs({"layout", "X", "A (and dA)", "B (and dB)", "Y"});
    for (const auto& p : plans)
      specs.add({p.strategy.name, p.specs.x.notation("X", {"B", "S", "M"}), p.specs.w_in.notation("A", {"M", "H"}),
                 p.specs.w_out.notation("B", {"H", "M"}), p.specs.y.notation("Y", {"B", "S", "M"})});
    out << "   The three layouts (a weight's gradient comes out split like the weight):\n" << specs.text();
    const FfnSpecs& pw = plans.back().specs;
    out << "   Pairwise, rows:cols of A " << shape_text(as) << " and B " << shape_text(bs) << " on each device:\n"
        << blocks_picture(mesh, pw.w_in, as) << blocks_picture(mesh, pw.w_out, bs);

    std::vector<FfnResult> results;
    for (std::size_t i = 0; i < strategies.size(); ++i) {
      config.strategy = strategies[i];
      auto& checks = session.report().checks;
      const std::size_t first = checks.size();
      results.push_back(run_ffn(session, config));
      for (std::size_t k = first; k < checks.size(); ++k) checks[k].name = strategies[i] + ": " + checks[k].name;
    }
    for (const auto& r : results) {  // for --json: each layout's collectives by pass
      session.report().strings[r.plan.strategy.name + "_forward"] = ffn_collectives_summary(r.plan, FfnPhase::forward);
      session.report().strings[r.plan.strategy.name + "_backward"] = ffn_collectives_summary(r.plan, FfnPhase::backward);
    }
    if (!session.runtime().is_root()) return session.finish();

    // The unsharded analytic gradients against central differences, in float64.
    const FfnInputs in = ffn_inputs(config.dims, config.seed);
    auto& checks = session.report().checks;
    out << "   Is the analytic backward right? Central differences (L(t+e) - L(t-e)) / 2e on one device:\n";
    for (auto v : finite_difference_checks(in, ffn_reference(in, true))) {
      v.name = "unsharded: " + v.name;
      out << "     " << v.name << ": " << v.line() << "\n";
      checks.push_back(v);
    }

    out << "\n3. The flip. Each weight enters one matmul forward and, transposed, one backward:\n";
    Table flip({"layout", "weight", "forward matmul", "cut there", "backward matmul", "cut there"});
    for (std::size_t i = 0; i < plans.size(); ++i) {
      flip.add({strategies[i], "W_in", "h = x W_in", cut(plan_for(plans[i], "h")), "dx = dh W_in^T",
                cut(plan_for(plans[i], "dx"))});
      flip.add({"", "W_out", "y = g W_out", cut(plan_for(plans[i], "y")), "dg = dy W_out^T",
                cut(plan_for(plans[i], "dg"))});
    }
    out << flip.text()
        << "   A column cut keeps its outputs whole per device, so they must be gathered; transposed, the same cut\n"
           "   falls on the summed dim and leaves partial sums, so the backward matmul ends in an AllReduce.\n\n";

    out << "4. Communication, derived by the planner for each matmul and measured by the ledger (bytes\n"
           "   sent per device; = plan: every collective and byte count as the planner predicted):\n";
    Table t({"layout", "forward", "backward", "fwd bytes", "bwd bytes", "= plan"});
    for (const auto& r : results) {
      bool same = r.collectives.size() == r.plan.collectives().size();
      std::size_t fwd = 0, bwd = 0;
      for (std::size_t k = 0; k < r.collectives.size(); ++k) {
        (k < r.forward_collectives ? fwd : bwd) += r.collectives[k].bytes_per_device;
        same = same && r.collectives[k].matches();
      }
      t.add({r.plan.strategy.name, ops(r.plan, FfnPhase::forward), ops(r.plan, FfnPhase::backward), std::to_string(fwd),
             std::to_string(bwd), same ? "yes" : "NO"});
    }
    out << t.text()
        << "   Per matmul: column = AllGather forward, AllReduce backward; row = AllReduce forward, AllGather\n"
           "   backward; pairwise = one AllReduce each way for the whole FFN. The weight gradients dA = X^T dH\n"
           "   and dB = G^T dY need no message in any of the three: they come out split like A and B.\n"
        << "   Every collective of every run, in order:\n" << collectives_table(session.report().collectives) << "\n";

    out << "5. Verdict: sharded gradients stitched together vs the unsharded analytic ones:\n";
    for (const auto& v : checks) out << "   " << v.name << ": " << v.line() << "\n";
    out << "\nTakeaway: transposing a weight swaps its column cut and its row cut, so the backward pass mirrors\n"
           "          the forward one; pairwise sharding is pairwise both ways: one AllReduce forward, one back.\n"
           "Next:     build/bin/11_propagation\n"
           "          annotate three tensors of the FFN and let propagation derive the rest.\n"
           "Exercise: build/bin/shardlab exercise --lesson 10\n";
    return session.finish();
  });
}
