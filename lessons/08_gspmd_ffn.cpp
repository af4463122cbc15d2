// Lesson 08 - the Transformer feed-forward layer in GSPMD's 2D layout (articles 001 and 002).
//
// One idea: name each tensor dim (batch, embed, hidden ...), map the names to mesh axes with a few
// rules, and the whole layer y = gelu(x W_in) W_out follows from the specs. The first matmul is
// Case 2 plus Case 1B: gather x over Y and W_in over X, and the hidden activations come out split
// like x, with no message after the product. The second is Case 1A with an outer clash on X: gather
// W_out over X, multiply into partial sums over Y, and ReduceScatter them straight into the input's
// layout, for half the bytes of an AllReduce. Every device stores 1/8 of everything and does 1/8 of
// the multiplications.
//
// Run:    build/bin/08_gspmd_ffn [--mesh X=2,Y=4] [--dims B=8,S=4,M=16,H=64 | --dims article] [--json]
//         mpiexec -n 8 build/bin/08_gspmd_ffn --backend mpi
// Prints: the mesh; the rule table and the specs it gives; device (X=0,Y=1)'s blocks; the planner's
//         steps for both matmuls; the collectives with bytes per device (measured and predicted)
//         and the AllReduce alternative beside the ReduceScatter; memory and FLOPs per device against
//         the unsharded layer, and the same bytes at the article's sizes; the verdict.
#include <cmath>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/einsum.hpp"
#include "core/error.hpp"
#include "core/gelu.hpp"
#include "core/layout.hpp"
#include "core/text.hpp"
#include "harness/cli/cli.hpp"
#include "harness/models/case_run_io.hpp"
#include "harness/models/ffn.hpp"
#include "harness/models/ffn_check.hpp"
#include "harness/models/memory_scaling.hpp"
#include "harness/check/pictures.hpp"
#include "harness/check/progress.hpp"
#include "harness/check/program_check.hpp"
#include "harness/check/session.hpp"
#include "core/table.hpp"

using namespace shardlab;

namespace {
// a / b to 3 decimals, rounded as ffn_memory_text rounds (so one ratio prints one way everywhere).
std::string ratio3(std::size_t a, std::size_t b) {
  return b > 0 ? format_number(std::round(static_cast<double>(a) / static_cast<double>(b) * 1000) / 1000, "%.3f") : "-";
}

// 1 and 2: the mesh, the rules from logical names to mesh axes, the specs they give, device 1's x.
void section_specs(std::ostream& out, const Mesh& mesh, const FfnSpecs& f, const FfnDims& d) {
  const std::string X = mesh.names()[0], Y = mesh.names()[1];
  const FfnStrategy& gspmd = ffn_strategy("gspmd");
  out << "1. Mesh " << mesh.text() << ": " << mesh.devices() << " devices.\n" << mesh.picture() << "\n";

  out << "2. Specs from logical names. The layer names its dims; rules map names to mesh axes:\n";
  Table rules({"logical name", "mesh axis"});
  for (const auto& [name, axis] : ffn_rules(gspmd, mesh)) rules.add({name, axis});
  out << rules.text();
  Table specs({"tensor", "logical dims", "spec", "notation", "block per device"});
  const std::vector<Spec> spec_of = {f.x, f.w_in, f.h, f.w_out, f.y};
  const std::vector<Shape> shape_of_t = {{d.b, d.s, d.m}, {d.m, d.h}, {d.b, d.s, d.h}, {d.h, d.m}, {d.b, d.s, d.m}};
  const std::vector<std::vector<std::string>> letters = {{"B", "S", "M"}, {"M", "H"}, {"B", "S", "H"}, {"H", "M"}, {"B", "S", "M"}};
  const auto logical = ffn_logical_names();
  for (std::size_t i = 0; i < logical.size(); ++i)
    specs.add({logical[i].tensor, "(" + join(logical[i].dims, ", ") + ")", spec_of[i].text(),
               spec_of[i].notation(logical[i].tensor, letters[i]), shape_text(local_shape(mesh, spec_of[i], shape_of_t[i]))});
  out << specs.text() << "   (seq has no rule, so it stays whole; heads is for attention, unused here.)\n";
  const Block x1 = block_of(mesh, f.x, shape_of_t[0], 1);
  out << "   Device 1 (" << X << "=0, " << Y << "=1) holds x" << x1.text() << ": batch " << x1.start[0] << ":" << x1.stop[0]
      << " of " << d.b << ", every position, embed " << x1.start[2] << ":" << x1.stop[2] << " of " << d.m << ".\n\n";
}

// The AllReduce alternative's verdict (root only). The alternative multiplies g and W_out as its
// element type holds them (g is not on the grid of eighths that keeps the layer's own sums exact),
// each device over H/|Y| terms, then adds |Y| partial sums: checked by the one checker as a one-op
// program (contraction_expected, program_check.hpp). Borrowing the layer's y tolerance failed a
// correct run at article size.
void check_alternative(Session& session, const RunResult& alt_run, const Spec& gathered, const Tensor& g,
                       const Tensor& w_out, const FfnDims& d, const std::string& verify, std::uint64_t seed) {
  const Mesh& mesh = session.mesh();
  const std::string Y = mesh.names()[1];
  const Einsum down_eq = Einsum::parse("bsh,hm->bsm");
  const std::size_t ny = static_cast<std::size_t>(mesh.axis_size(Y));
  auto& checks = session.report().checks;
  if (verify == "sketch") {
    // Where the layer itself is sketched (its reference would cost as much as the run), so is
    // this: y against g W_out by projections and 64 rows recomputed, float32 calibrated.
    std::vector<Tensor> blocks;
    for (const auto& o : alt_run.outputs) blocks.push_back(o.at("y_ar"));
    const Assembly y_ar = assemble(mesh, gathered, Shape{d.b, d.s, d.m}, blocks, "y_ar");
    // (It reads g and W_out converted to the element type, as rounded() would make them.)
    Verdict v = sketch_contraction("y via AllReduce (sketch)", y_ar.tensor, g, w_out, (d.h + ny - 1) / ny, ny, session.dtype(),
                                   seed + 17, static_cast<std::size_t>(mesh.devices()));
    if (!y_ar.replicas_agree) v.pass = false, v.detail = y_ar.disagreement + "; " + v.detail;
    checks.push_back(v);
  } else {
    const ExpectedTensor y_ref = contraction_expected(down_eq, rounded(g, session.dtype()), rounded(w_out, session.dtype()),
                                                      session.dtype(), static_cast<int>(ny));
    checks.push_back(verify_output(mesh, gathered, alt_run, "y_ar", y_ref.value, y_ref.bound));
    checks.back().name = "y via AllReduce vs unsharded";
  }
}

// 6: memory and work per device against the unsharded layer, at the article's sizes, and as the
// mesh grows (article 002's claim), then for training at scale.
void section_memory(std::ostream& out, Session& session, const FfnConfig& config, const FfnResult& r,
                    const std::vector<CollectiveSummary>& all) {
  const Mesh& mesh = session.mesh();
  const FfnSpecs& f = r.plan.specs;
  const FfnDims& d = config.dims;
  const Shape h_shape{d.b, d.s, d.h};
  out << "6. Memory and work per device against one device holding the whole layer:\n" << ffn_memory_text(r)
      << "   The gathered x, W_in and W_out are larger than a block but live only for one matmul each.\n"
      << "   Each device computed its own block of h (batch:hidden), no two alike:\n"
      << mesh.picture([&](int dev) {
           const Block b = block_of(mesh, f.h, h_shape, dev);
           return std::to_string(b.start[0]) + ":" + std::to_string(b.stop[0]) + " " + std::to_string(b.start[2]) +
                  ":" + std::to_string(b.stop[2]);
         });
  FfnConfig big = config;
  big.dims = article_ffn_dims();
  double article_held = 0, article_transient = 0, article_weights = 0;  // for training at scale, below
  try {  // the article's sizes on this mesh, from the planner alone (float64, 8 bytes per number)
    const FfnPlan a = plan_ffn(mesh, big);
    Table t({"collective", "tensor", "over", "sent here (measured)", "sent at B=8,S=512,M=5120,H=20480"});
    const auto steps = a.collectives(FfnPhase::forward);
    for (std::size_t i = 0; i < steps.size() && i < all.size(); ++i)
      t.add({step_kind_name(steps[i]->kind), steps[i]->tensor, axes_text(steps[i]->axes),
             human_bytes(static_cast<double>(all[i].bytes_per_device)), human_bytes(static_cast<double>(steps[i]->predicted_bytes))});
    out << "   At the article's sizes (article 001), predicted from the same plan: bytes each device sends\n"
        << "   (" << dtype_text(session.dtype()) << ") and memory per device:\n" << t.text()
        << "     memory per device " << human_bytes(static_cast<double>(a.stored_bytes_per_device)) << " held, "
        << human_bytes(static_cast<double>(a.peak_bytes_per_device)) << " peak; unsharded "
        << human_bytes(static_cast<double>(a.unsharded_peak_bytes)) << " peak\n"
        << "     (held, here and above: the most a device keeps at one time between stages; at these\n"
        << "     sizes x, W_in and W_out before the first matmul, as y comes only after x is freed)\n\n";
    article_held = static_cast<double>(a.stored_bytes_per_device);
    article_transient = static_cast<double>(a.peak_bytes_per_device - a.stored_bytes_per_device);
    article_weights = static_cast<double>(2 * big.dims.m * big.dims.h * session.element_bytes());
  } catch (const Error& e) {
    out << "   (the article's sizes do not split over this mesh: " << e.what() << ")\n\n";
  }

  // Article 002's claim, memory per device falling linearly with the devices, measured: the same
  // step on 1 ... 64 sim devices (a mesh of its own, whatever this lesson runs on).
  FfnConfig grow = config;
  grow.finite_differences = false;
  const std::vector<MemoryPoint> points = memory_scaling(grow, 64);
  nlohmann::ordered_json scaling = nlohmann::ordered_json::array();
  for (const auto& p : points)
    scaling.push_back({{"devices", p.devices}, {"mesh", p.mesh}, {"measured", p.measured}, {"held_bytes", p.held},
                       {"peak_bytes", p.peak}, {"unsharded_held_bytes", p.unsharded_held},
                       {"unsharded_peak_bytes", p.unsharded_peak}});
  session.report().json["memory_scaling"] = scaling.dump();
  std::size_t doubling = 0;  // devices of the last point whose held x n stayed within 5% of 1
  for (const auto& p : points)
    if (std::abs(static_cast<double>(p.held) * p.devices / static_cast<double>(p.unsharded_held) - 1) < 0.05)
      doubling = static_cast<std::size_t>(p.devices);
  out << "   Memory as the mesh grows (article 002: each device's share falls as 1/n), this step on\n"
      << "   1 to " << points.back().devices << " devices of a sim mesh, each device counting what it holds (\"x n\": times the\n"
      << "   devices over one device's whole step; 1.00 is exactly 1/n):\n"
      << memory_scaling_table(points, "   ")
      << (doubling == static_cast<std::size_t>(points.back().devices)
              ? "   What a device keeps between stages falls as 1/n: the article's claim.\n"
              : "   What a device keeps between stages falls as 1/n up to " + std::to_string(doubling) +
                    " devices, then more slowly:\n   some of its tensors are split over one axis only.\n")
      << "   The peak does not: while a matmul runs, the device also holds the gathered x and W blocks,\n"
      << "   each split over one axis only, so they shrink as 1/sqrt(n) on these square meshes. Hence\n"
      << "   this mesh's " << ratio3(r.peak_bytes_per_device, r.plan.unsharded_peak_bytes) << " peak beside its "
      << ratio3(r.stored_bytes_per_device, r.plan.unsharded_stored_bytes)
      << " held: the transient copies, not the layout,\n   set how far the peak falls.";
  if (points.front().devices == 1 && points.front().peak != points.front().unsharded_peak)
    out << " Even on one device the step peaks at\n   " << human_bytes(static_cast<double>(points.front().peak))
        << ", not the unsharded " << human_bytes(static_cast<double>(points.front().unsharded_peak))
        << ": its gathers over axes of one device still copy their operand,\n   which the unsharded step does not.";
  out << "\n";
  if (article_held > 0) {
    // Article 002's claim is about training at scale: the weights of many layers with their
    // gradients and Adam's two states (4x the weights) stay, while only one layer's gathered
    // copies are transient at a time.
    const double layers = 48, kept = layers * 4 * article_weights / mesh.devices() + (article_held - article_weights / mesh.devices());
    const double peak_share = (kept + article_transient) / kept;
    out << "   Training at scale is where article 002's claim holds: with " << format_number(layers, "%.0f")
        << " such layers at the article's\n   sizes, each with its gradients and Adam's two states (4x the weights), a "
        << "device keeps\n   " << human_bytes(kept) << " on this mesh, while the gathers of the one layer running add "
        << human_bytes(article_transient) << ": the peak\n   is " << format_number(peak_share, "%.3f")
        << " x what it keeps, so it too falls as 1/n to within " << format_number((peak_share - 1) * 100, "%.1f")
        << "%.\n";
    session.report().numbers["training_peak_over_held"] = peak_share;
  }
  out << "\n";
}
}  // namespace

int main(int argc, char** argv) {
  Cli cli("08_gspmd_ffn", "Lesson 08: the FFN in GSPMD's 2D layout, AllGather then ReduceScatter", "X=2,Y=4");
  std::string dims_flag = "B=8,S=4,M=16,H=64";
  cli.option("--dims", dims_flag, "B=..,S=..,M=..,H=.. (dims left out keep their defaults), or 'article' for B=8,S=512,M=5120,H=20480 (about 35 s and 9 GB on 2 cores)");
  cli.uneven_option();  // dims that do not divide the mesh
  cli.inputs_option();  // --inputs FILE.npz: named input tensors read from it
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    if (const int axes = Mesh::parse(cli.common.mesh).rank(); axes != 2)  // before any output
      throw Error(ErrorKind::parse, "--mesh " + cli.common.mesh + " has " + std::to_string(axes) + " ax" +
                                        (axes == 1 ? "is" : "es") + "; lesson 08 splits the batch over one mesh axis "
                                        "and the hidden dim over another: try --mesh X=2,Y=4");
    Session session("08_gspmd_ffn", cli.common);
    const Mesh& mesh = session.mesh();
    FfnConfig config;
    config.dtype = session.dtype();
    config.dims = parse_ffn_dims(dims_flag);
    config.seed = cli.common.seed;
    config.inputs = cli.common.inputs;
    const FfnPlan plan = plan_ffn(mesh, config);  // checks the mesh and dims before anything prints
    refuse_ffn_over_memory(plan, config, cli.common.backend == "mpi" ? 1 : mesh.devices());
    const FfnSpecs& f = plan.specs;
    const FfnDims& d = config.dims;
    const std::string X = mesh.names()[0], Y = mesh.names()[1];

    auto& out = session.out();
    section_specs(out, mesh, f, d);

    // The layer on every device; the AllReduce alternative of the second matmul runs after it.
    const FfnResult r = run_ffn(session, config);
    const Plan& up = r.plan.stages[0].plan;
    const Plan& down = r.plan.stages[2].plan;
    Spec gathered = f.y;
    gathered.dims[2].clear();  // X,_,_ : the AllReduce leaves every device of a Y group the whole sum
    const Plan alt = plan_contraction(Einsum::parse("bsh,hm->bsm"), mesh, down.a, down.b, gathered, {false, "y_ar", session.element_bytes()});
    // On a terminal, its phases as the layer's (harness/check/progress.hpp); each ends before a print.
    std::optional<progress::Phase> shown;
    shown.emplace("the AllReduce alternative: g = gelu(x W_in), unsharded");
    FfnInputs in = ffn_inputs_as<double>(d, config.seed, false);  // no R: forward only
    read_ffn_inputs(in, config.inputs, DType::float64, false);
    // x W_in is exact in float32 too (integers times eighths, |h| <= M/2 while M < 2^22), and
    // sgemm is about twice dgemm (`shardlab bench ffn` prints the rates): the same g, sooner.
    const DType exact_in = exact_in_eighths(d.m * 0.5, DType::float32) ? DType::float32 : DType::float64;
    const Tensor g = gelu(contract(Einsum::parse("bsm,mh->bsh"), in.x, in.w_in, exact_in));
    shown.emplace("the AllReduce alternative on " + std::to_string(mesh.devices()) + " devices");
    const RunResult alt_run = session.run(plan_spmd(alt, g, in.w_out));
    shown.emplace("checking the AllReduce alternative");
    ffn_report_fields(r, session.report());
    if (!session.runtime().is_root()) return session.finish();

    check_alternative(session, alt_run, gathered, g, in.w_out, d, r.verify, config.seed);
    const auto& all = r.collectives;
    const CollectiveSummary& rs = all.back();
    const CollectiveSummary ar = summarize(alt_run.ledger).back();
    shown.reset();
    session.report().numbers["reduce_scatter_bytes_per_device"] = static_cast<double>(rs.bytes_per_device);
    session.report().numbers["all_reduce_bytes_per_device"] = static_cast<double>(ar.bytes_per_device);

    out << "3. First matmul, h = x W_in (\"bsm,mh->bsh\"). M is split over " << Y << " in x but over " << X
        << " in W_in (Case 1B):\n   gather both. B (on " << X << ") and H (on " << Y << ") are outer dims on different "
        << "axes (Case 2): keep them split.\n" << plan_text(up)
        << "   h comes out " << up.out_spec.notation("h", {"B", "S", "H"}) << " straight from the product: "
        << (up.steps.back().kind == StepKind::contract ? "no message after it" : "then more steps") << ".\n"
        << "   g = gelu(h) is elementwise: each device applies it to its own block.\n\n";
    out << "4. Second matmul, y = g W_out (\"bsh,hm->bsm\"). H is split over " << Y << " in both (Case 1A):\n"
        << "   multiply in place, partial sums over " << Y << ". But B and W_out's M are both on " << X
        << ":\n   gather W_out over " << X << ", keep the batch split.\n" << plan_text(down)
        << "   The partial sums go straight to y's spec, the input's layout: ReduceScatter, not AllReduce.\n\n";

    out << "5. Communication, measured by the ledger:\n" << ffn_collectives_table(r)
        << "   The alternative for the last step: AllReduce over " << Y << " (y ends " << gathered.text()
        << ",\n   then each device keeps its slice):\n"
        << "     reduce_scatter y: " << rs.bytes_per_device << " bytes/device   all_reduce y: " << ar.bytes_per_device
        << " bytes/device\n     (predicted " << ar.predicted_bytes_per_device << ")"
        << (rs.bytes_per_device > 0 ? ", " + format_number(double(ar.bytes_per_device) / double(rs.bytes_per_device), "%.3g") + "x as much"
                                    : " (an axis of size 1 moves nothing either way)")
        << "\n\n";

    section_memory(out, session, config, r, all);

    out << "7. Verdict against gelu(x W_in) W_out on one device:\n";
    for (const auto& v : session.report().checks) out << "   " << v.name << ": " << v.line() << "\n";
    out << "\nTakeaway: name the dims, map names to mesh axes, and the planner derives the rest: two\n"
           "          AllGathers feed the first matmul, one AllGather and a ReduceScatter finish the second,\n"
           "          and y leaves in x's layout with every device holding and computing 1/" << mesh.devices()
        << " of the layer.\n"
           "Next:     build/bin/09_column_row_pairwise\n"
           "          the same layer on a 1-D mesh, Megatron style: one AllReduce.\n"
           "Exercise: build/bin/shardlab exercise --lesson 08\n";
    return session.finish();
  });
}
