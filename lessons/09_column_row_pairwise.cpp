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
//         build/bin/09_column_row_pairwise --inputs FILE.npz   (x, W_in, W_out of your own)
//         mpiexec -n 4 build/bin/09_column_row_pairwise --backend mpi
// Prints: the mesh; the blocks of x, W_in and W_out each layout gives a device; the four programs with
//         their collectives and bytes per device (measured and predicted) side by side; the planner
//         deriving the same; the verdicts.
#include <cmath>
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
#include "harness/models/case_run_io.hpp"
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

namespace {

// sum_d |a_d w_d|: a contraction's partial products on the devices of a line whose weight w is cut
// by rows (and a by its last dim to match), each in absolute value, added.
Tensor partial_products_abs(const Einsum& eq, const Tensor& a, const Tensor& w, const Mesh& mesh, const Spec& w_rows) {
  Tensor sum;
  for (int p = 0; p < mesh.devices(); ++p) {
    const DimBlock b = dim_block(mesh, w_rows, shape_of(w), 0, p);
    Tensor part = xt::abs(contract(eq, Tensor(xt::view(a, xt::all(), xt::all(), xt::range(b.start, b.stop))),
                                   Tensor(xt::view(w, xt::range(b.start, b.stop), xt::all()))));
    if (p == 0) sum = std::move(part);
    else sum += part;
  }
  return sum;
}

// How far a program that multiplies in float64 and rounds only on the wire may land from the
// unsharded float64 product c, in a type of unit roundoff u. Gathered, each element is rounded
// once: |c^ - c| <= u |c| (2u |c| allowed). All-reduced, the devices' partial products p_d are
// each rounded to the type (u |p_d|), then added in it in any order or tree (gamma_{n-1}(u)
// sum_d |fl(p_d)|, Higham eq. 4.4). Both add float64's worst case for the products and the
// reference (float64_sums).
struct WireBounds { Tensor gathered, reduced; };
WireBounds wire_bounds(const Tensor& c, const Tensor& parts_abs, double u, int n, double float64_sums) {
  const double adds = sum_gamma(static_cast<std::size_t>(n > 1 ? n - 1 : 0), u);
  return {2 * u * xt::abs(c) + float64_sums, (u + adds * (1 + u)) * parts_abs * (1 + 4 * u) + u * xt::abs(c) + float64_sums};
}

// The largest |gelu'(x)|, at x = sqrt 2: Phi(sqrt 2) + sqrt 2 phi(sqrt 2) = 1.1289...; an error e
// in h moves gelu(h) by at most this times e.
double gelu_slope_bound() { return 0.5 * (1 + std::erf(1.0)) + std::sqrt(2.0) * std::exp(-1.0) / std::sqrt(2 * M_PI); }

const char* const kNames[] = {"x W_in column-wise", "x W_in row-wise", "FFN row then column", "FFN pairwise"};

// What every section reads: the line, the layer's dims and inputs, the cuts, how y is checked.
struct Lesson {
  explicit Lesson(Session& s) : session(s), mesh(s.mesh()) {}
  Session& session;
  const Mesh& mesh;
  FfnConfig config;
  FfnPlan row_col, pairwise;
  std::string Y;
  std::vector<std::string> T;  // {Y}: the axes every collective runs over
  int n = 0;
  FfnDims d;
  Shape xs, ws;                        // x and W_in
  Spec whole, x_cols, w_cols, w_rows;  // a weight cut by columns, by rows
  FfnInputs in;
  std::string inputs_read;  // --inputs: what was read, for section 1
  Einsum up = Einsum::parse("bsm,mh->bsh"), down = Einsum::parse("bsh,hm->bsm");
  bool own_inputs = false, sketch_y = false, root = false;
  DType compute = DType::float64;
};

// The unsharded values each run is checked against, and the tolerances of the full check.
struct Reference {
  Tensor h, g, y;
  Tensor tol_rc, tol_pw, tol_h_col, tol_h_row;
};

// 1 and 2: the mesh, then the two cuts of W_in and what x must look like for each.
void section_cuts(const Lesson& L) {
  auto& out = L.session.out();
  const Mesh& mesh = L.mesh;
  const int n = L.n;
  const FfnDims& d = L.d;
  out << "1. Mesh " << mesh.text() << ": a line of " << n << (n == 1 ? " device.\n" : " devices.\n") << mesh.picture()
      << L.inputs_read << "\n";
  out << "2. The two cuts of W_in[M, H] (" << d.m << "x" << d.h << ") in h = x W_in, and what x must look like for each:\n";
  Table cuts({"cut", "W_in", "W_in block", "x", "x block", "h on each device"});
  cuts.add({"column-wise", L.w_cols.notation("W_in", {"M", "H"}), shape_text(local_shape(mesh, L.w_cols, L.ws)),
            L.whole.notation("x", {"B", "S", "M"}), shape_text(L.xs), "whole columns [B,S,H/" + std::to_string(n) + "]"});
  cuts.add({"row-wise", L.w_rows.notation("W_in", {"M", "H"}), shape_text(local_shape(mesh, L.w_rows, L.ws)),
            L.x_cols.notation("x", {"B", "S", "M"}), shape_text(local_shape(mesh, L.x_cols, L.xs)),
            "full size, partial sums {U_" + L.Y + "}"});
  out << cuts.text() << "   Cutting x by columns is free: each device keeps its slice of a replicated x.\n"
      << "   rows:cols of W_in on each device, column-wise then row-wise:\n"
      << blocks_picture(mesh, L.w_cols, L.ws) << blocks_picture(mesh, L.w_rows, L.ws) << "\n";
}

// The tolerances of the full check (root only).
// x W_in is exact on the generated inputs (integers times eighths): both h runs must match the
// unsharded h bit for bit. On a user's own inputs h gets wire_bounds: gathered column-wise,
// all-reduced row-wise.
// y sums H terms after GELU; the worst case for any order (reduction_tolerance) is far above
// what the runs round at large sizes (3.8 x y's RMS at --dims article), so each y check also
// gets wire_bounds for what its run does, and never exceeds tol_y: row then column gathers y,
// pairwise all-reduces it. On a user's own inputs each run's g also differs from the unsharded
// one: row then column applies GELU to an all-reduced h, pairwise to a float64 h summed in
// another order. An error e_h in h moves y by at most gelu_slope_bound() e_h |W_out|, added.
void full_tolerances(const Lesson& L, Reference& ref) {
  const DType dtype = L.session.dtype();
  const double max_term = xt::amax(xt::abs(ref.g))() * xt::amax(xt::abs(L.in.w_out))();
  const double tol_y = reduction_tolerance(L.d.h, max_term, dtype, L.mesh.devices());
  const double u = unit_roundoff(dtype), float64_sums = reduction_tolerance(L.d.h, max_term);
  const WireBounds y_bounds = wire_bounds(ref.y, partial_products_abs(L.down, ref.g, L.in.w_out, L.mesh, L.w_rows), u, L.n,
                                          float64_sums);
  ref.tol_rc = xt::minimum(tol_y, y_bounds.gathered);
  ref.tol_pw = xt::minimum(tol_y, y_bounds.reduced);
  if (!L.own_inputs) return;
  const double h_sums = reduction_tolerance(L.d.m, xt::amax(xt::abs(L.in.x))() * xt::amax(xt::abs(L.in.w_in))());
  const WireBounds h_bounds = wire_bounds(ref.h, partial_products_abs(L.up, L.in.x, L.in.w_in, L.mesh, L.w_rows), u, L.n, h_sums);
  ref.tol_h_col = h_bounds.gathered;
  ref.tol_h_row = h_bounds.reduced;
  const Tensor w_out_abs = xt::abs(L.in.w_out);
  const double slope = gelu_slope_bound();
  ref.tol_rc += slope * contract(L.down, h_bounds.reduced, w_out_abs);
  ref.tol_pw += slope * h_sums * xt::sum(w_out_abs, {0});  // |W_out| summed over H, for every token
}

// Program i's verdict, as soon as it ends (on the root), its outputs then dropped: at article
// size a gathered h is 0.7 GB per device. Programs that multiply in float32 (the sketch) sum H
// float32 products a device (row then column, then a gather that adds nothing) or H/n and then n
// partial sums over the ring (pairwise): the sketch's bound for exactly that (sketch_contraction,
// harness/models/ffn.hpp), which reads g and W_out rounded to float32, as the devices' products do.
void check_run(const Lesson& L, const Reference& ref, int i, RunResult& run) {
  if (!L.root) return;
  auto& checks = L.session.report().checks;
  const Mesh& mesh = L.mesh;
  if (i < 2) {  // bit for bit on the generated inputs
    checks.push_back(L.own_inputs ? verify_output(mesh, L.whole, run, "h", ref.h, i == 0 ? ref.tol_h_col : ref.tol_h_row)
                                  : verify_output(mesh, L.whole, run, "h", ref.h, 0.0));
    checks.back().name = std::string(kNames[i]) + " vs unsharded";
  } else if (!L.sketch_y) {
    checks.push_back(verify_output(mesh, L.whole, run, "y", ref.y, i == 2 ? ref.tol_rc : ref.tol_pw));
    checks.back().name = std::string(kNames[i]) + " vs unsharded";
  } else {
    const FfnDims& d = L.d;
    std::vector<Tensor> blocks;
    for (auto& o : run.outputs) blocks.push_back(std::move(o.at("y")));  // cleared below
    const Assembly got = assemble(mesh, L.whole, Shape{d.b, d.s, d.m}, blocks, "y");
    const std::size_t parts = i == 2 ? 1 : static_cast<std::size_t>(L.n);
    Verdict v = sketch_contraction(std::string(kNames[i]) + " vs g W_out (sketch)", got.tensor, ref.g, L.in.w_out,
                                   (d.h + parts - 1) / parts, parts, L.compute, L.config.seed + 17 + i,
                                   static_cast<std::size_t>(L.n));
    if (!got.replicas_agree) v.pass = false, v.detail = got.disagreement + "; " + v.detail;
    checks.push_back(v);
  }
  run.outputs.clear();  // the ledger stays for the tables below
}

// AllGather of the last dim of a [B, S, size] tensor cut over the line. When size does not divide
// (--uneven) the blocks differ (chunk: the _v form) or carry padding (pad: gathered padded, the
// padding then dropped); the planner's step does either.
Tensor gather_last(const Lesson& L, Device& dev, const Tensor& block, std::size_t size, const std::string& label) {
  PlanStep s;
  s.kind = StepKind::all_gather;
  s.tensor = label;
  s.axes = L.T;
  s.dim = 2;
  s.before = L.x_cols;
  s.after = L.whole;
  s.global = Shape{L.d.b, L.d.s, size};
  return execute_steps(dev, {s}, block);
}

// The four programs, each what every device runs (the collective is the only line that talks),
// each checked as soon as it ends. `advance` counts layer-sized matmuls for the progress line.
std::vector<RunResult> run_programs(const Lesson& L, const Reference& ref, const std::function<void(double)>& advance) {
  const Mesh& mesh = L.mesh;
  const FfnInputs& in = L.in;
  const DType compute = L.compute;
  const FfnDims& d = L.d;
  std::vector<RunResult> runs;
  runs.push_back(L.session.run([&](Device& dev) -> Outputs {
    const Tensor mine = contract(L.up, in.x, local_block(in.w_in, mesh, L.w_cols, dev.id()), compute);  // [B,S,H/n]
    return {{"h", gather_last(L, dev, mine, d.h, "h")}};                                                   // [B,S,H]
  }));
  check_run(L, ref, 0, runs.back());
  advance(1);
  runs.push_back(L.session.run([&](Device& dev) -> Outputs {
    const Tensor part = contract(L.up, local_block(in.x, mesh, L.x_cols, dev.id()),  // [B,S,M/n] x [M/n,H]
                                 local_block(in.w_in, mesh, L.w_rows, dev.id()), compute);
    return {{"h", all_reduce(dev, part, L.T, "h")}};  // [B,S,H], summed
  }));
  check_run(L, ref, 1, runs.back());
  advance(1);
  runs.push_back(L.session.run([&](Device& dev) -> Outputs {  // row then column
    const Tensor part = contract(L.up, local_block(in.x, mesh, L.x_cols, dev.id()),
                                 local_block(in.w_in, mesh, L.w_rows, dev.id()), compute);
    const Tensor g = gelu(all_reduce(dev, part, L.T, "h"));  // GELU needs the whole sum: every device, all of h
    const Tensor cols = contract(L.down, g, local_block(in.w_out, mesh, L.w_cols, dev.id()), compute);  // [B,S,M/n]
    return {{"y", gather_last(L, dev, cols, d.m, "y")}};
  }));
  check_run(L, ref, 2, runs.back());
  advance(2);
  runs.push_back(L.session.run([&](Device& dev) -> Outputs {  // column then row: pairwise
    const Tensor g = gelu(contract(L.up, in.x, local_block(in.w_in, mesh, L.w_cols, dev.id()), compute));  // [B,S,H/n]
    const Tensor part = contract(L.down, g, local_block(in.w_out, mesh, L.w_rows, dev.id()), compute);     // [B,S,M], partial
    return {{"y", all_reduce(dev, part, L.T, "y")}};
  }));
  check_run(L, ref, 3, runs.back());
  advance(2);
  return runs;
}

// The planner, given only the specs of each layout, derives the same collectives and bytes.
void planner_checks(const Lesson& L, const std::vector<RunResult>& runs) {
  const Mesh& mesh = L.mesh;
  const std::size_t bytes = L.session.element_bytes();
  const Plan col_plan = plan_contraction(L.up, mesh, {"x", L.whole, L.xs}, {"W_in", L.w_cols, L.ws}, L.whole, {false, "h", bytes});
  const Plan row_plan = plan_contraction(L.up, mesh, {"x", L.x_cols, L.xs}, {"W_in", L.w_rows, L.ws}, L.whole, {false, "h", bytes});
  const std::string agree[] = {plan_vs_ledger(col_plan, summarize(runs[0].ledger)),
                               plan_vs_ledger(row_plan, summarize(runs[1].ledger)),
                               ffn_plan_vs_ledger(L.row_col, summarize(runs[2].ledger)),
                               ffn_plan_vs_ledger(L.pairwise, summarize(runs[3].ledger))};
  for (int i = 0; i < 4; ++i) {
    Verdict v;
    v.name = std::string("planner agrees: ") + kNames[i];
    v.detail = agree[i];
    v.pass = agree[i].empty();
    L.session.report().checks.push_back(v);
  }
}

// 3: each program's collectives and bytes per device, measured beside predicted.
void section_communication(const Lesson& L, const std::vector<RunResult>& runs) {
  auto& out = L.session.out();
  const int n = L.n;
  out << "3. Communication, each program on its own (bytes per device measured; predicted by the ring):\n";
  Table t({"program", "collectives", "bytes/device", "predicted", "GELU work per device"});
  std::size_t bytes[4];
  for (int i = 0; i < 4; ++i) {
    std::string ops;
    std::size_t predicted = 0;
    bytes[i] = 0;
    for (const auto& c : summarize(runs[static_cast<std::size_t>(i)].ledger)) {
      ops += (ops.empty() ? "" : " + ") + c.op + " " + c.tensor;
      bytes[i] += c.bytes_per_device;
      predicted += c.predicted_bytes_per_device;
    }
    t.add({kNames[i], ops, std::to_string(bytes[i]), std::to_string(predicted),
           i == 2 ? "all of h, everywhere" : i == 3 ? "1/" + std::to_string(n) + " of h" : "-"});
  }
  out << t.text() << "   Planner for the FFN layouts: row then column: " << ffn_collectives_summary(L.row_col, FfnPhase::forward)
      << "\n                                pairwise:         " << ffn_collectives_summary(L.pairwise, FfnPhase::forward)
      << "\n";
  if (n > 1)
    out << "   Pairwise sends " << bytes[3] << " bytes per device against " << bytes[2]
        << ", in one collective\n   instead of two, and no device repeats another's GELU.\n\n";
  else
    out << "   A line of 1 device sends nothing in any layout; --mesh Y=4 shows pairwise's one collective\n"
           "   against two.\n\n";
}

}  // namespace

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
  cli.inputs_option();               // --inputs FILE.npz: x, W_in, W_out read from it
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    // A mesh or dims this lesson cannot cut: one sentence, before the MPI check and any output.
    refuse_bad_ffn_line(cli.common, "Y=4", dims_flag, "B=8,S=4,M=16,H=64", "lesson 09");
    const std::string verify = parse_verify_mode(verify_flag);
    if (verify == "sketch" && cli.common.dtype == "bfloat16")
      throw Error(ErrorKind::parse, "--verify sketch checks float32 and float64 runs; lesson 09 multiplies bfloat16 "
                                    "blocks in float64, so use --verify full (or auto) with --dtype bfloat16");
    // On a user's own x and W_in (--inputs) h rounds, and the runs' g and y differ from the
    // unsharded ones by more than the sketch of y allows for: only the full check holds.
    const bool own_inputs = !cli.common.inputs.empty();
    if (verify == "sketch" && own_inputs)
      throw Error(ErrorKind::parse, "--verify sketch holds only on lesson 09's generated inputs, where x W_in is exact; "
                                    "with --inputs use --verify full (or auto)");
    // x W_in sums M products of |x| <= 2 and |W_in| <= 1/4 on the grid of eighths (ffn_inputs): exact
    // in float32 while M < 2^22 (2560 at most at article size), so every h check can be bit for
    // bit; past that only the full check holds.
    const bool h_exact = !own_inputs && exact_in_eighths(parse_ffn_dims(dims_flag).m * 0.5, DType::float32);
    if (verify == "sketch" && !h_exact)
      throw Error(ErrorKind::parse, "--verify sketch needs M below 4194304 (x W_in exact in float32); use --verify full");
    Session session("09_column_row_pairwise", cli.common);
    Lesson L(session);
    L.config.dtype = session.dtype();
    L.config.dims = parse_ffn_dims(dims_flag);
    L.config.seed = cli.common.seed;
    L.config.strategy = "row_column";
    L.row_col = plan_ffn(L.mesh, L.config);
    L.config.strategy = "pairwise";
    L.pairwise = plan_ffn(L.mesh, L.config);
    refuse_ffn_over_memory(L.pairwise, L.config, cli.common.backend == "mpi" ? 1 : L.mesh.devices());
    L.Y = L.mesh.names()[0], L.T = {L.Y}, L.n = L.mesh.devices();
    L.d = L.config.dims;
    L.xs = Shape{L.d.b, L.d.s, L.d.m}, L.ws = Shape{L.d.m, L.d.h};
    L.whole = Spec::parse("_,_,_"), L.x_cols = Spec::parse("_,_," + L.Y);
    L.w_cols = Spec::parse("_," + L.Y), L.w_rows = Spec::parse(L.Y + ",_");

    // x holds B*S tokens of M features; h = x W_in, g = gelu(h), y = g W_out.
    L.in = ffn_inputs_as<double>(L.d, L.config.seed, false);  // no R: forward only
    // --inputs: each of x, W_in, W_out the file names, its shape checked, rounded to the type.
    L.inputs_read = read_named_inputs(cli.common.inputs, {{"x", &L.in.x}, {"W_in", &L.in.w_in}, {"W_out", &L.in.w_out}},
                                      session.dtype());
    L.own_inputs = own_inputs;
    // --verify full: the programs multiply in float64 and y is compared element by element with
    // the unsharded layer. sketch: they multiply in the element type (float32: sgemm, about 2x
    // dgemm, as the tool's layer does) and y is checked against g W_out by projections
    // (harness/check/sketch.hpp), a pass over y instead of the layer's GEMMs again. auto: sketch
    // above ffn_full_verify_flops (--dims article is 1.7e12), where the full check costs about 1.6x
    // the sketch's time and 1.4x its memory (docs/performance.md, lesson 09 at article size).
    L.sketch_y = verify == "sketch" || (verify == "auto" && session.dtype() != DType::bfloat16 && h_exact &&
                                        L.pairwise.unsharded_flops() > ffn_full_verify_flops);
    L.compute = L.sketch_y ? session.dtype() : DType::float64;
    session.report().strings["verify"] = L.sketch_y ? "sketch" : "full";  // for --json
    // On a terminal (harness/check/progress.hpp): the unsharded products first, then how many of
    // the layer-sized matmuls are done (the pairwise bound's partial products with the full check,
    // then 1, 1, 2 and 2 for the four programs, each with its check). Each phase ends before the
    // lesson prints.
    std::optional<progress::Phase> shown;
    shown.emplace(L.sketch_y ? "the unsharded x W_in" : "the unsharded layer");
    // Only the root checks: other ranks (under mpiexec) skip the unsharded products.
    L.root = session.runtime().is_root();
    Reference ref;
    if (L.root) ref.h = contract(L.up, L.in.x, L.in.w_in, L.compute), ref.g = gelu(ref.h);
    if (L.root && !L.sketch_y) ref.y = contract(L.down, ref.g, L.in.w_out);
    shown.reset();

    section_cuts(L);
    shown.emplace("4 programs, in matmuls of the layer's size", 0, L.sketch_y || !L.root ? 6 : 7);
    double done = 0;
    auto advance = [&](double matmuls) { shown->advance(done += matmuls); };
    if (L.root && !L.sketch_y) {
      full_tolerances(L, ref);
      advance(1);
    }
    const std::vector<RunResult> runs = run_programs(L, ref, advance);
    shown.reset();  // the line goes before the lesson's own output
    if (!L.root) return session.finish();

    planner_checks(L, runs);
    section_communication(L, runs);
    auto& out = session.out();
    out << "4. Verdict against the unsharded h = x W_in and y = gelu(h) W_out:\n";
    for (const auto& v : session.report().checks) out << "   " << v.name << ": " << v.line() << "\n";
    out << "\nTakeaway: a column cut gathers its outputs, a row cut sums them; cutting W_in by columns and\n"
           "          W_out by rows lets GELU run on the split hidden layer and leaves one AllReduce for the\n"
           "          whole FFN.\n"
           "Next:     build/bin/10_pairwise_backward\n"
           "          the backward pass flips each cut, and pairwise stays one AllReduce.\n"
           "Exercise: build/bin/shardlab exercise --lesson 09\n";
    return session.finish();
  });
}
