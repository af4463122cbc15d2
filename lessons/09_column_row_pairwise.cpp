// Lesson 09 - column-wise, row-wise and pairwise sharding of the FFN, Megatron style (article 003).
//
// One idea: on a line of n devices a weight can be cut two ways. Cut W_in by columns and every
// device needs all of x but computes whole columns of h = x W_in: an AllGather puts them side by
// side. Cut W_in by rows and x must be cut by columns to match; every device computes a full-size h
// of partial sums: an AllReduce adds them. In the FFN, h = x W_in, g = gelu(h), y = g W_out, the
// order matters. Rows first needs the AllReduce before GELU (gelu(a + b) is not gelu(a) + gelu(b)),
// then the column cut of W_out needs an AllGather. Columns first leaves h split by columns, which
// GELU keeps and which is exactly the input a row cut of W_out wants: the pairwise layout needs a
// single AllReduce at the very end.
//
// Tensors are lower case (x, h, g, y) or W_in, W_out; X and Y name mesh axes only.
//
// Run:    build/bin/09_column_row_pairwise [--mesh Y=4] [--dims B=8,S=4,M=16,H=64] [--json]
//         mpiexec -n 4 build/bin/09_column_row_pairwise --backend mpi
// Prints: the mesh; the blocks of x, W_in and W_out each layout gives a device; the four programs with
//         their collectives and bytes per device (measured and predicted) side by side; the planner
//         deriving the same; the verdicts.
#include <optional>

#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "collectives/collectives.hpp"
#include "core/einsum.hpp"
#include "core/error.hpp"
#include "core/gelu.hpp"
#include "core/layout.hpp"
#include "core/text.hpp"
#include "harness/cli/cli.hpp"
#include "harness/models/ffn.hpp"
#include "harness/models/ffn_check.hpp"
#include "harness/models/ffn_line.hpp"
#include "harness/check/pictures.hpp"
#include "harness/check/progress.hpp"
#include "harness/check/sketch.hpp"
#include "harness/check/session.hpp"
#include "core/table.hpp"
#include "harness/check/plan_ledger.hpp"

using namespace shardlab;


int main(int argc, char** argv) {
  Cli cli("09_column_row_pairwise", "Lesson 09: column-wise, row-wise and pairwise sharding (Megatron)", "Y=4");
  std::string dims_flag = "B=8,S=4,M=16,H=64";
  cli.option("--dims", dims_flag,
             "B=..,S=..,M=..,H=..: x is [B, S, M] (B*S tokens of M features),\n"
             "W_in is [M, H] and W_out is [H, M]; dims left out keep their defaults");
  std::string verify_flag = "auto";
  cli.option("--verify", verify_flag,
             "how y is checked: full (every element against the unsharded layer, products in float64),\n"
             "sketch (against g W_out by random projections and sampled rows, products in the element\n"
             "type; float32 or float64) or auto (sketch above 5e10 unsharded FLOPs, e.g. --dims article;\n"
             "full for bfloat16)");
  cli.mesh_follows_processes("Y");  // mpiexec -n 8 ... --backend mpi: a line of 8
  cli.uneven_option();               // M or H that do not split over the line
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    // A mesh or dims this lesson cannot cut: one sentence, before the MPI check and any output.
    refuse_bad_ffn_line(cli.common, "Y=4", dims_flag, "B=8,S=4,M=16,H=64", "lesson 09");
    const std::string verify = parse_verify_mode(verify_flag);
    if (verify == "sketch" && cli.common.dtype == "bfloat16")
      throw Error(ErrorKind::parse, "--verify sketch checks float32 and float64 runs; lesson 09 multiplies bfloat16 "
                                    "blocks in float64, so use --verify full (or auto) with --dtype bfloat16");
    // x W_in sums M products of |x| <= 2 and |W_in| <= 1/4 on the grid of eighths (ffn_inputs): exact
    // in float32 while M < 2^22 (2560 at most at article size), so every h check can be bit for
    // bit; past that only the full check holds.
    const bool h_exact = exact_in_eighths(parse_ffn_dims(dims_flag).m * 0.5, DType::float32);
    if (verify == "sketch" && !h_exact)
      throw Error(ErrorKind::parse, "--verify sketch needs M below 4194304 (x W_in exact in float32); use --verify full");
    Session session("09_column_row_pairwise", cli.common);
    const Mesh& mesh = session.mesh();
    FfnConfig config;
    config.dtype = session.dtype();
    config.dims = parse_ffn_dims(dims_flag);
    config.seed = cli.common.seed;
    config.strategy = "row_column";
    const FfnPlan row_col = plan_ffn(mesh, config);
    config.strategy = "pairwise";
    const FfnPlan pairwise = plan_ffn(mesh, config);
    refuse_ffn_over_memory(pairwise, config, cli.common.backend == "mpi" ? 1 : mesh.devices());
    const std::string Y = mesh.names()[0];
    const std::vector<std::string> T = {Y};
    const int n = mesh.devices();
    const FfnDims& d = config.dims;
    const Shape xs{d.b, d.s, d.m}, ws{d.m, d.h};  // x and W_in
    const Spec whole = Spec::parse("_,_,_"), x_cols = Spec::parse("_,_," + Y);
    const Spec w_cols = Spec::parse("_," + Y), w_rows = Spec::parse(Y + ",_");  // a weight cut by columns, by rows

    // x holds B*S tokens of M features; h = x W_in, g = gelu(h), y = g W_out.
    const FfnInputs in = ffn_inputs_as<double>(d, config.seed, false);  // no R: forward only
    const Einsum up = Einsum::parse("bsm,mh->bsh"), down = Einsum::parse("bsh,hm->bsm");
    // --verify full: the programs multiply in float64 and y is compared element by element with
    // the unsharded layer. sketch: they multiply in the element type (float32: sgemm, about 2x
    // dgemm, as the tool's layer does) and y is checked against g W_out by projections
    // (harness/check/sketch.hpp), a pass over y instead of the layer's GEMMs again. auto: sketch
    // above ffn_full_verify_flops (--dims article is 1.7e12), where the full check costs about 1.6x
    // the sketch's time and 1.4x its memory (docs/performance.md, lesson 09 at article size).
    const bool sketch_y = verify == "sketch" || (verify == "auto" && session.dtype() != DType::bfloat16 && h_exact &&
                                                 pairwise.unsharded_flops() > ffn_full_verify_flops);
    const DType compute = sketch_y ? session.dtype() : DType::float64;
    session.report().strings["verify"] = sketch_y ? "sketch" : "full";  // for --json
    // On a terminal (harness/check/progress.hpp): the unsharded products first, then how many of
    // the layer-sized matmuls are done (the pairwise bound's partial products with the full check,
    // then 1, 1, 2 and 2 for the four programs, each with its check). Each phase ends before the
    // lesson prints.
    std::optional<progress::Phase> shown;
    shown.emplace(sketch_y ? "the unsharded x W_in" : "the unsharded layer");
    // Only the root checks: other ranks (under mpiexec) skip the unsharded products.
    const bool root = session.runtime().is_root();
    const Tensor h = root ? contract(up, in.x, in.w_in, compute) : Tensor(), g_ref = root ? gelu(h) : Tensor();
    const Tensor y = sketch_y || !root ? Tensor() : contract(down, g_ref, in.w_out);
    shown.reset();

    auto& out = session.out();
    out << "1. Mesh " << mesh.text() << ": a line of " << n << (n == 1 ? " device.\n" : " devices.\n") << mesh.picture()
        << "\n";
    out << "2. The two cuts of W_in[M, H] (" << d.m << "x" << d.h << ") in h = x W_in, and what x must look like for each:\n";
    Table cuts({"cut", "W_in", "W_in block", "x", "x block", "h on each device"});
    cuts.add({"column-wise", w_cols.notation("W_in", {"M", "H"}), shape_text(local_shape(mesh, w_cols, ws)),
              whole.notation("x", {"B", "S", "M"}), shape_text(xs), "whole columns [B,S,H/" + std::to_string(n) + "]"});
    cuts.add({"row-wise", w_rows.notation("W_in", {"M", "H"}), shape_text(local_shape(mesh, w_rows, ws)),
              x_cols.notation("x", {"B", "S", "M"}), shape_text(local_shape(mesh, x_cols, xs)),
              "full size, partial sums {U_" + Y + "}"});
    out << cuts.text() << "   Cutting x by columns is free: each device keeps its slice of a replicated x.\n"
        << "   rows:cols of W_in on each device, column-wise then row-wise:\n"
        << blocks_picture(mesh, w_cols, ws) << blocks_picture(mesh, w_rows, ws) << "\n";

    // AllGather of the last dim of a [B, S, size] tensor cut over the line. When size does not
    // divide (--uneven) the blocks differ (chunk: the _v form) or carry padding (pad: gathered
    // padded, the padding then dropped); the planner's step does either.
    auto gather_last = [&](Device& dev, const Tensor& block, std::size_t size, const std::string& label) {
      PlanStep s;
      s.kind = StepKind::all_gather;
      s.tensor = label;
      s.axes = T;
      s.dim = 2;
      s.before = x_cols;
      s.after = whole;
      s.global = Shape{d.b, d.s, size};
      return execute_steps(dev, {s}, block);
    };
    // Each run is checked as soon as it ends (on the root), and its outputs dropped: at article
    // size a gathered h is 0.7 GB per device.
    auto& checks = session.report().checks;
    const char* names[] = {"x W_in column-wise", "x W_in row-wise", "FFN row then column", "FFN pairwise"};
    // x W_in is exact (integers times eighths): both h runs must match the unsharded h bit for bit.
    // y sums H terms after GELU; the worst case for any order (reduction_tolerance) is far above
    // what the runs round at large sizes (3.8 x y's RMS at --dims article), so each y check also
    // gets a bound for what its run does. Programs that multiply in float64 (contract on float64
    // arrays) round only on the wire, so: row then column gathers each element once:
    // |y^ - y| <= u |y| (2u |y| allowed); pairwise all-reduces the devices' partial products p_d,
    // each rounded to the type (u |p_d|), then added in the type in any order or tree
    // (gamma_{n-1}(u) sum_d |fl(p_d)|, Higham eq. 4.4). Both add float64's worst case for the
    // products and the reference, and never exceed tol_y.
    Tensor tol_rc, tol_pw;
    shown.emplace("4 programs, in matmuls of the layer's size", 0, sketch_y || !root ? 6 : 7);
    double done = 0;
    auto advance = [&](double matmuls) { shown->advance(done += matmuls); };
    if (root && !sketch_y) {
      const double max_term = xt::amax(xt::abs(g_ref))() * xt::amax(xt::abs(in.w_out))();
      const double tol_y = reduction_tolerance(d.h, max_term, session.dtype(), mesh.devices());
      const double u = unit_roundoff(session.dtype()), float64_sums = reduction_tolerance(d.h, max_term);
      Tensor parts_abs = xt::zeros<double>(y.shape());  // sum_d |p_d|, the devices' partial products
      for (int p = 0; p < n; ++p) {
        const DimBlock b = dim_block(mesh, w_rows, Shape{d.h, d.m}, 0, p);
        parts_abs += xt::abs(contract(down, Tensor(xt::view(g_ref, xt::all(), xt::all(), xt::range(b.start, b.stop))),
                                      Tensor(xt::view(in.w_out, xt::range(b.start, b.stop), xt::all()))));
      }
      const double adds = sum_gamma(static_cast<std::size_t>(n > 1 ? n - 1 : 0), u);
      tol_rc = xt::minimum(tol_y, 2 * u * xt::abs(y) + float64_sums);
      tol_pw = xt::minimum(tol_y, (u + adds * (1 + u)) * parts_abs * (1 + 4 * u) + u * xt::abs(y) + float64_sums);
      advance(1);
    }
    // Programs that multiply in float32 sum H float32 products a device (row then column, then a
    // gather that adds nothing) or H/n and then n partial sums over the ring (pairwise): the
    // sketch's bound for exactly that (sketch_contraction, harness/models/ffn.hpp), which reads g
    // and W_out rounded to float32, as the devices' products do.
    auto check = [&](int i, RunResult& run) {
      if (!root) return;
      if (i < 2) {
        checks.push_back(verify_output(mesh, whole, run, "h", h, 0.0));
        checks.back().name = std::string(names[i]) + " vs unsharded";
      } else if (!sketch_y) {
        checks.push_back(verify_output(mesh, whole, run, "y", y, i == 2 ? tol_rc : tol_pw));
        checks.back().name = std::string(names[i]) + " vs unsharded";
      } else {
        std::vector<Tensor> blocks;
        for (auto& o : run.outputs) blocks.push_back(std::move(o.at("y")));  // cleared below
        const Assembly got = assemble(mesh, whole, Shape{d.b, d.s, d.m}, blocks, "y");
        const std::size_t parts = i == 2 ? 1 : static_cast<std::size_t>(n);
        Verdict v = sketch_contraction(std::string(names[i]) + " vs g W_out (sketch)", got.tensor, g_ref, in.w_out,
                                       (d.h + parts - 1) / parts, parts, compute, config.seed + 17 + i,
                                       static_cast<std::size_t>(n));
        if (!got.replicas_agree) v.pass = false, v.detail = got.disagreement + "; " + v.detail;
        checks.push_back(v);
      }
      run.outputs.clear();  // the ledger stays for the tables below
    };
    // Each program is what every device runs; the collective is the only line that talks.
    RunResult col = session.run([&](Device& dev) -> Outputs {
      const Tensor mine = contract(up, in.x, local_block(in.w_in, mesh, w_cols, dev.id()), compute);  // [B,S,H/n]
      return {{"h", gather_last(dev, mine, d.h, "h")}};                                    // [B,S,H]
    });
    check(0, col);
    advance(1);
    RunResult row = session.run([&](Device& dev) -> Outputs {
      const Tensor part = contract(up, local_block(in.x, mesh, x_cols, dev.id()),  // [B,S,M/n] x [M/n,H]
                                   local_block(in.w_in, mesh, w_rows, dev.id()), compute);
      return {{"h", all_reduce(dev, part, T, "h")}};  // [B,S,H], summed
    });
    check(1, row);
    advance(1);
    RunResult rc = session.run([&](Device& dev) -> Outputs {  // row then column
      const Tensor part = contract(up, local_block(in.x, mesh, x_cols, dev.id()), local_block(in.w_in, mesh, w_rows, dev.id()), compute);
      const Tensor g = gelu(all_reduce(dev, part, T, "h"));  // GELU needs the whole sum: every device, all of h
      const Tensor cols = contract(down, g, local_block(in.w_out, mesh, w_cols, dev.id()), compute);  // [B,S,M/n]
      return {{"y", gather_last(dev, cols, d.m, "y")}};
    });
    check(2, rc);
    advance(2);
    RunResult pw = session.run([&](Device& dev) -> Outputs {  // column then row: pairwise
      const Tensor g = gelu(contract(up, in.x, local_block(in.w_in, mesh, w_cols, dev.id()), compute));  // [B,S,H/n]
      const Tensor part = contract(down, g, local_block(in.w_out, mesh, w_rows, dev.id()), compute);      // [B,S,M], partial
      return {{"y", all_reduce(dev, part, T, "y")}};
    });
    check(3, pw);
    advance(2);
    shown.reset();  // the line goes before the lesson's own output
    if (!root) return session.finish();

    const RunResult* runs[] = {&col, &row, &rc, &pw};
    // The planner, given only the specs of each layout, derives the same collectives and bytes.
    const Plan col_plan = plan_contraction(up, mesh, {"x", whole, xs}, {"W_in", w_cols, ws}, whole, {false, "h", session.element_bytes()});
    const Plan row_plan = plan_contraction(up, mesh, {"x", x_cols, xs}, {"W_in", w_rows, ws}, whole, {false, "h", session.element_bytes()});
    const std::string agree[] = {plan_vs_ledger(col_plan, summarize(col.ledger)), plan_vs_ledger(row_plan, summarize(row.ledger)),
                                 ffn_plan_vs_ledger(row_col, summarize(rc.ledger)), ffn_plan_vs_ledger(pairwise, summarize(pw.ledger))};
    for (int i = 0; i < 4; ++i) {
      Verdict v;
      v.name = std::string("planner agrees: ") + names[i];
      v.detail = agree[i];
      v.pass = agree[i].empty();
      checks.push_back(v);
    }

    out << "3. Communication, each program on its own (bytes per device measured; predicted by the ring):\n";
    Table t({"program", "collectives", "bytes/device", "predicted", "GELU work per device"});
    std::size_t bytes[4];
    for (int i = 0; i < 4; ++i) {
      std::string ops;
      std::size_t predicted = 0;
      bytes[i] = 0;
      for (const auto& c : summarize(runs[i]->ledger)) {
        ops += (ops.empty() ? "" : " + ") + c.op + " " + c.tensor;
        bytes[i] += c.bytes_per_device;
        predicted += c.predicted_bytes_per_device;
      }
      t.add({names[i], ops, std::to_string(bytes[i]), std::to_string(predicted),
             i == 2 ? "all of h, everywhere" : i == 3 ? "1/" + std::to_string(n) + " of h" : "-"});
    }
    out << t.text() << "   Planner for the FFN layouts: row then column: " << ffn_collectives_summary(row_col, FfnPhase::forward)
        << "\n                                pairwise:         " << ffn_collectives_summary(pairwise, FfnPhase::forward)
        << "\n";
    if (n > 1)
      out << "   Pairwise sends " << bytes[3] << " bytes per device against " << bytes[2]
          << ", in one collective\n   instead of two, and no device repeats another's GELU.\n\n";
    else
      out << "   A line of 1 device sends nothing in any layout; --mesh Y=4 shows pairwise's one collective\n"
             "   against two.\n\n";

    out << "4. Verdict against the unsharded h = x W_in and y = gelu(h) W_out:\n";
    for (const auto& v : checks) out << "   " << v.name << ": " << v.line() << "\n";
    out << "\nTakeaway: a column cut gathers its outputs, a row cut sums them; cutting W_in by columns and\n"
           "          W_out by rows lets GELU run on the split hidden layer and leaves one AllReduce for the\n"
           "          whole FFN.\n"
           "Next:     build/bin/10_pairwise_backward\n"
           "          the backward pass flips each cut, and pairwise stays one AllReduce.\n"
           "Exercise: build/bin/shardlab exercise --lesson 09\n";
    return session.finish();
  });
}
