// Lesson 10 - the backward pass of column, row and pairwise sharding (article 003).
//
// One idea: the gradient of h = x W with respect to x is dh W^T. Transposing W turns its columns
// into rows, so a weight cut by columns for the forward matmul is cut by rows for the backward one,
// and the other way round: a column-wise layer gathers going forward and all-reduces going back; a
// row-wise layer all-reduces forward and gathers back. In the pairwise FFN, y = gelu(x W_in) W_out
// with W_in by columns and W_out by rows, both flips line up again: one AllReduce forward, one
// backward, and the weight gradients land split exactly like the weights, with no message at all
// (as long as the batch is not split too: that is data parallelism, lesson 14).
//
// The loss is L = sum(y * r) for a fixed random r, so dL/dy = r. The gradients are computed sharded,
// stitched together and compared with the unsharded analytic ones, which are checked in turn
// against central finite differences in float64.
//
// Run:    build/bin/10_pairwise_backward [--mesh Y=4] [--dims B=8,S=4,M=16,H=64] [--json]
//         mpiexec -n 4 build/bin/10_pairwise_backward --backend mpi
// Prints: the mesh; the backward formulas; the unsharded gradients against finite differences;
//         each weight's cut forward and backward (the flip); the collectives forward and backward
//         of the three layouts with bytes per device; the verdicts for y, dx, dW_in and dW_out.
#include <cctype>

#include "core/error.hpp"
#include "harness/cli/cli.hpp"
#include "harness/models/ffn.hpp"
#include "harness/models/ffn_check.hpp"
#include "harness/models/ffn_line.hpp"
#include "harness/check/pictures.hpp"
#include "harness/check/session.hpp"
#include "harness/check/sketch_memo.hpp"
#include "core/text.hpp"
#include "core/table.hpp"

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

// Every collective of the three runs, with the layout and pass it belongs to, and the notes of
// every collectives table (what msgs and bytes/device count).
std::string run_table(const std::vector<FfnResult>& results) {
  Table t({"#", "layout", "pass", "collective", "over", "tensor", "msgs", "bytes/device", "predicted", "match"});
  std::vector<CollectiveSummary> all;
  for (const auto& r : results)
    for (std::size_t i = 0; i < r.collectives.size(); ++i) {
      const auto& c = r.collectives[i];
      t.add({std::to_string(all.size()), i == 0 ? r.plan.strategy.name : "",
             i < r.forward_collectives ? "forward" : "backward", c.op, c.axes, c.tensor, std::to_string(c.messages),
             measured_cell(c), std::to_string(c.predicted_bytes_per_device), match_cell(c)});
      all.push_back(c);
    }
  return t.text() + collectives_notes(all);
}

std::string ops(const FfnPlan& p, FfnPhase phase) {
  std::string out;
  for (const PlanStep* s : p.collectives(phase)) out += (out.empty() ? "" : " + ") + step_kind_name(s->kind) + " " + s->tensor;
  return out.empty() ? "none" : out;
}

// 1 and 2: the mesh, the layer's forward and backward formulas, the three layouts' specs.
void section_layer(std::ostream& out, const Mesh& mesh, const FfnDims& d, const std::vector<FfnPlan>& plans) {
  out << "1. Mesh " << mesh.text() << ": a line of " << mesh.devices() << " devices.\n" << mesh.picture() << "\n";
  out << "2. The layer and its gradients. The loss is L = sum(y * r) for a fixed random r shaped like y,\n"
         "   so dy = dL/dy = r (random, so that every output counts). dt is the gradient of L for a tensor t:\n"
         "     forward    h = x W_in         g = gelu(h)          y = g W_out\n"
         "     backward   dg = dy W_out^T    dW_out = g^T dy      (W_out used transposed)\n"
         "                dh = dg * gelu'(h)                      (elementwise, like GELU)\n"
         "                dx = dh W_in^T     dW_in = x^T dh       (W_in used transposed)\n";
  const Shape as{d.m, d.h}, bs{d.h, d.m};
  Table specs({"layout", "x", "W_in (and dW_in)", "W_out (and dW_out)", "y"});
  for (const auto& p : plans)
    specs.add({p.strategy.name, p.specs.x.notation("x", {"B", "S", "M"}), p.specs.w_in.notation("W_in", {"M", "H"}),
               p.specs.w_out.notation("W_out", {"H", "M"}), p.specs.y.notation("y", {"B", "S", "M"})});
  out << "   The three layouts (a weight's gradient comes out split like the weight):\n" << specs.text();
  const FfnSpecs& pw = plans.back().specs;
  out << "   Pairwise, rows:cols of W_in " << shape_text(as) << " and W_out " << shape_text(bs) << " on each device:\n"
      << blocks_picture(mesh, pw.w_in, as) << blocks_picture(mesh, pw.w_out, bs);
}

// 3: each weight's cut in its forward matmul and, transposed, in its backward one.
void section_flip(std::ostream& out, const std::vector<FfnPlan>& plans, const std::vector<std::string>& strategies) {
  out << "\n3. The flip. Each weight enters one matmul forward and, transposed, one backward:\n";
  Table flip({"layout", "weight", "forward matmul", "cut there", "backward matmul", "cut there"});
  for (std::size_t i = 0; i < plans.size(); ++i) {
    flip.add({strategies[i], "W_in", "h = x W_in", cut(plan_for(plans[i], "h")), "dx = dh W_in^T",
              cut(plan_for(plans[i], "dx"))});
    flip.add({"", "W_out", "y = g W_out", cut(plan_for(plans[i], "y")), "dg = dy W_out^T",
              cut(plan_for(plans[i], "dg"))});
  }
  out << flip.text()
      << "   A column cut keeps its outputs whole per device, so they must be gathered; transposed, the\n"
         "   same cut falls on the summed dim and leaves partial sums: the backward matmul ends in an\n"
         "   AllReduce.\n\n";
}

// 4: the collectives each layout needs forward and backward, as planned and as measured.
void section_communication(std::ostream& out, const std::vector<FfnResult>& results) {
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
         "   backward; pairwise = one AllReduce each way for the whole FFN. The weight gradients\n"
         "   dW_in = x^T dh and dW_out = g^T dy need no message in any of the three, because no mesh axis\n"
         "   splits the batch here: they come out split like W_in and W_out. With data parallelism\n"
         "   (lesson 14) each device holds part of the batch and its weight gradients need an AllReduce.\n"
      << "   Every collective of every run, in order:\n" << run_table(results) << "\n";
}

// 5: every check but the unsharded layer's own, with its error over its tolerance.
void section_verdict(std::ostream& out, const std::vector<Verdict>& checks) {
  out << "5. Verdict: sharded gradients stitched together vs the unsharded analytic ones (the\n"
         "   central-difference checks of section 2 count too):\n";
  Table verdicts({"check", "result", "max_abs_err", "worst err/tol", "catches"});
  for (const auto& v : checks)
    if (v.name.rfind("unsharded: ", 0) != 0)
      verdicts.add({v.name, v.pass ? "PASS" : "FAIL", format_number(v.max_abs_error, "%.3g"),
                    v.worst_ratio >= 0 ? format_number(v.worst_ratio, "%.3g") : "-", power_cell(v)});
  out << verdicts.text() << "   err/tol: the error over the tolerance its own element allows (1 = at the limit);\n"
      << "   catches: the smallest wrong element the check is sure to catch (exact: any).\n";
  for (const auto& v : checks)
    if (!v.pass) out << "   " << v.name << ": " << v.line() << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  Cli cli("10_pairwise_backward", "Lesson 10: gradients of column, row and pairwise sharding", "Y=4");
  std::string dims_flag = "B=8,S=4,M=16,H=64";
  cli.option("--dims", dims_flag, "B=..,S=..,M=..,H=.. (x and y are [B, S, M], W_in is [M, H], W_out is [H, M]; dims left out keep their "
             "defaults)");
  cli.mesh_follows_processes("Y");  // mpiexec -n 8 ... --backend mpi: a line of 8
  cli.uneven_option();  // dims that do not divide the mesh
  cli.inputs_option();  // --inputs FILE.npz: named input tensors read from it
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    // A mesh or dims this lesson cannot cut: one sentence, before the MPI check and any output.
    refuse_bad_ffn_line(cli.common, "Y=4", dims_flag, "B=8,S=4,M=16,H=64", "lesson 10");
    Session session("10_pairwise_backward", cli.common);
    const Mesh& mesh = session.mesh();
    FfnConfig config;
    config.dtype = session.dtype();
    config.dims = parse_ffn_dims(dims_flag);
    config.seed = cli.common.seed;
    config.inputs = cli.common.inputs;
    config.backward = true;
    config.finite_differences = false;  // once below, for the unsharded layer all three share
    config.share_inputs = true;         // the three layouts run on one set of inputs, made once
    const std::vector<std::string> strategies = {"column", "row", "pairwise"};
    std::vector<FfnPlan> plans;
    for (const auto& s : strategies) {  // checks a one-axis mesh and the dims before anything prints
      config.strategy = s;
      plans.push_back(plan_ffn(mesh, config));
      refuse_ffn_over_memory(plans.back(), config, cli.common.backend == "mpi" ? 1 : mesh.devices());
    }

    auto& out = session.out();
    section_layer(out, mesh, config.dims, plans);

    std::vector<FfnResult> results;
    // The three layouts' stages read the same operands (h and dg come out exact, g and dh from the
    // same function), so each sketch's reference side is computed once and looked up after.
    const SketchReuse reuse;
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

    // The gradient rules against central differences, in float64, on inputs of their own: a check
    // of the derivation, which does not depend on the size, so above run_ffn's own limit for them
    // (2e6 FLOPs) on the default dims.
    const bool large = plans.back().unsharded_flops() > 2e6;
    const FfnDims rule_dims = large ? parse_ffn_dims("B=8,S=4,M=16,H=64") : config.dims;
    auto& checks = session.report().checks;
    out << "   Are the backward's rules right? On one device, in float64, nudge a few entries t of each\n"
           "   input by a step e and compare (L(t+e) - L(t-e)) / 2e with the gradient the rules give;\n"
           "   doubling the step shows how much of the difference is truncation. Once for the layer"
        << (large ? ".\n   The rules do not depend on the size, so they are checked on the default B=8,S=4,M=16,H=64:\n"
                  : ":\n");
    for (auto v : ffn_rule_checks(rule_dims, config.seed)) {
      v.name = "rules: " + v.name;
      out << "     " << v.name << ": " << v.line() << "\n";
      checks.push_back(v);
    }

    section_flip(out, plans, strategies);
    section_communication(out, results);
    section_verdict(out, checks);
    out << "\nTakeaway: transposing a weight swaps its column cut and its row cut, so the backward pass mirrors\n"
           "          the forward one; pairwise sharding is pairwise both ways: one AllReduce forward, one back.\n"
           "Next:     build/bin/11_propagation\n"
           "          annotate three tensors of the FFN and let propagation derive the rest.\n"
           "Exercise: build/bin/shardlab exercise --lesson 10\n";
    return session.finish();
  });
}
