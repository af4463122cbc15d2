#include "harness/cli/cmd_matmul.hpp"

#include <iostream>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xsort.hpp>

#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/layout.hpp"
#include "core/text.hpp"
#include "harness/cli/cli.hpp"
#include "harness/cli/contraction_inputs.hpp"
#include "harness/cli/contraction_report.hpp"
#include "harness/cost/cost.hpp"
#include "harness/check/npy.hpp"
#include "harness/check/pictures.hpp"
#include "harness/check/program_check.hpp"
#include "core/write_file.hpp"
#include "harness/plan/plan_search.hpp"
#include "harness/plan/search_text.hpp"
#include "harness/plan/planner.hpp"
#include "harness/check/session.hpp"
#include "core/table.hpp"
#include "harness/cli/timeout_option.hpp"
#include "harness/cli/inject_option.hpp"
#include "harness/check/plan_ledger.hpp"

namespace shardlab {

namespace {

struct ContractionOptions {
  CommonOptions common;
  bool einsum = false;
  std::string equation = "ik,kj->ij";
  std::string a_spec, b_spec;          // matmul
  std::vector<std::string> specs;      // einsum: two specs
  std::string out_spec;                // empty: the natural result
  std::string shape;                   // matmul: m,k,n
  std::string dims;                    // einsum: b=8,s=4,...
  std::string a_in, b_in, out, out_dtype;  // out_dtype empty: the inputs' type
  std::string names = "A,B,C";         // labels of the operands and the result
  std::string outer_gather = "B";      // which operand gives up an outer dim on a clashing axis
  std::string plan = "search";         // search: the fewest bytes; article: the articles' rules
  std::string objective = "bytes";     // bytes, or time (needs --preset)
  std::string preset;                  // hardware of --objective time
  bool explain = false;                // also the articles' plan and the best rejected ones
  bool plan_only = false;
};

// The reference materialises every product term; past this many, BLAS on one device stands in.
constexpr double kBroadcastLimit = 1 << 25;

void add_common(CLI::App* c, ContractionOptions& o) {
  o.common.mesh = "X=2,Y=4";
  c->add_option("--mesh", o.common.mesh, "device mesh: X=2,Y=4 or 2x4")->capture_default_str();
  add_collective_timeout(c, o.common.collective_timeout);
  c->add_option("--backend", o.common.backend, "sim (threads) or mpi (run under mpiexec -n <devices>)")
      ->capture_default_str();
  c->add_option("--collectives", o.common.collectives, "ring (ours) or native (MPICH's own; mpi backend)")
      ->capture_default_str();
  c->add_option("--seed", o.common.seed, "seed for the random inputs")->capture_default_str();
  c->add_option("--dtype", o.common.dtype, "element type stored and moved: float32, float64 or bfloat16")
      ->capture_default_str();
  c->add_option("--out-spec", o.out_spec,
                "spec of the result, e.g. X,Y or _,_{Y} (keep partial sums over Y), or auto (the cheapest layout it "
                "can reach); default: the natural layout, as propagation gives it (JAX, DTensor)");
  c->add_option("--a-in", o.a_in, "A from a .npy file (float16, float32 or float64, C order)");
  c->add_option("--b-in", o.b_in, "B from a .npy file");
  c->add_option("--out", o.out, "write the assembled result here (.npy) if it verifies");
  c->add_option("--out-dtype", o.out_dtype, "float16, float32 or float64 (default: the inputs' type for .npy inputs, else --dtype's, float32 for bfloat16)");
  c->add_option("--outer-gather", o.outer_gather,
                "A or B: when outer dims of both sit on one mesh axis, which gives it up (B, the weight, by default: "
                "the batch stays split)")
      ->capture_default_str();
  c->add_option("--names", o.names, "labels of A, B and the result in the plan and ledger, like x,W_in,h")
      ->capture_default_str();
  c->add_option("--plan", o.plan, "search (the fewest bytes per device) or article (the articles' rules)")
      ->capture_default_str();
  c->add_flag("--explain", o.explain, "with --plan search: also the articles' plan and the best rejected ones");
  c->add_option("--objective", o.objective, "what the search minimises: bytes (per device) or time (modeled on --preset)")
      ->capture_default_str();
  c->add_option("--preset", o.preset, "hardware for --objective time, as in shardlab cost (e.g. tpu-v4)");
  c->add_flag("--plan-only", o.plan_only, "print the plan and stop");
  c->add_flag("--json", o.common.json, "print one JSON object instead of the text report");
  c->add_flag("--quiet", o.common.quiet, "print only the verdict line");
  c->add_option("--trace", o.common.trace, "also write the run's timeline here (Chrome Trace JSON; open in ui.perfetto.dev)");
  add_inject_option(c, o.common);
  o.common.uneven = "chunk";
  c->add_option("--uneven", o.common.uneven,
                "a dim that does not divide its mesh axes: chunk (blocks of ceil(d/n), the last shorter, as "
                "torch.chunk), pad (each ceil(d/n), zero-padded, as JAX) or none (refuse it)")
      ->capture_default_str();
}

// The sizes --shape (m,k,n) or --dims give, once --a-in and --b-in are known to come together.
DimSizes sizes_asked(const ContractionOptions& o) {
  if (o.a_in.empty() != o.b_in.empty())
    throw Error(ErrorKind::parse, "give both --a-in and --b-in, or neither (then the inputs are random)");
  if (o.einsum) return parse_dim_sizes(o.dims);
  if (o.shape.empty()) return {};
  const Shape mkn = parse_shape(o.shape, "--shape");
  if (mkn.size() != 3)
    throw Error(ErrorKind::parse, "--shape has " + std::to_string(mkn.size()) + " sizes; expected m,k,n like 4,16,4");
  return {{'i', mkn[0]}, {'k', mkn[1]}, {'j', mkn[2]}};
}

double elements(const Shape& s) {
  double n = 1;
  for (std::size_t d : s) n *= static_cast<double>(d);
  return n;
}

// What a run holds at once, in bytes: the inputs (float64, and their rounded copies), on the root
// the reference and the assembled result (and the broadcast reference's table of products), and
// every device in this process its blocks as stored and as multiplied.
double predicted_run_bytes(const Plan& plan, const ContractionInputs& in, double terms, bool broadcast,
                           int devices_here) {
  const double out = elements(plan.out_shape);
  return 8 * 2 * (elements(in.shape_a) + elements(in.shape_b)) + 8 * 2 * out + (broadcast ? 8 * terms : 0) +
         devices_here * static_cast<double>(plan.stored_bytes() + plan.working_bytes());
}

// Flags checked before any work: a bad value fails before the mesh is built.
void check_flags(const ContractionOptions& o) {
  if (o.outer_gather != "A" && o.outer_gather != "B")
    throw Error(ErrorKind::parse, "--outer-gather is '" + o.outer_gather + "'; use A or B");
  if (!o.out_dtype.empty()) parse_npy_type(o.out_dtype);
  if (!o.out.empty()) check_writable(o.out);
  if (o.plan_only && !o.out.empty())
    throw Error(ErrorKind::parse, "--out with --plan-only: no result is computed, so there is nothing to write");
  refuse_shared_paths({{"--out", o.out}, {"--trace", o.common.trace}}, {{"--a-in", o.a_in}, {"--b-in", o.b_in}});
}

// The equation and the specs.
Contraction read_specs(const ContractionOptions& o) {
  Contraction c;
  c.eq = Einsum::parse(o.equation);
  c.a.spec = Spec::parse(o.einsum ? o.specs.at(0) : o.a_spec);
  c.b.spec = Spec::parse(o.einsum ? o.specs.at(1) : o.b_spec);
  c.auto_out = o.out_spec == "auto";
  if (!o.out_spec.empty() && !c.auto_out) c.out_spec = Spec::parse(o.out_spec);
  return c;
}

// The rest, once the inputs' shapes are known: the labels, and how the plan is chosen.
void read_plan_choices(const ContractionOptions& o, const ContractionInputs& in, std::size_t element_bytes,
                       Contraction& c) {
  const std::vector<std::string> names = split(o.names, ',');
  if (names.size() != 3)
    throw Error(ErrorKind::parse, "--names has " + std::to_string(names.size()) + " labels; give three, like x,W_in,h");
  for (const auto& n : names)
    if (!is_identifier(trim(n))) throw Error(ErrorKind::parse, "--names label '" + n + "' is not a plain name");
  c.result = trim(names[2]);
  if (o.plan != "search" && o.plan != "article")
    throw Error(ErrorKind::parse, "--plan is '" + o.plan + "'; use search (the fewest bytes) or article (the articles' rules)");
  c.a.name = trim(names[0]);
  c.a.shape = in.shape_a;
  c.b.name = trim(names[1]);
  c.b.shape = in.shape_b;
  if (o.objective != "bytes" && o.objective != "time")
    throw Error(ErrorKind::parse, "--objective is '" + o.objective + "'; use bytes or time (with --preset)");
  if (o.objective == "time" && o.preset.empty())
    throw Error(ErrorKind::parse, "--objective time needs --preset, the hardware to model (see shardlab cost)");
  if (o.objective == "bytes" && !o.preset.empty())
    throw Error(ErrorKind::parse, "--preset is only read with --objective time");
  if (o.objective == "time" && o.plan != "search")
    throw Error(ErrorKind::parse, "--objective time picks among searched plans; drop --plan article");
  if (c.auto_out && o.plan != "search")
    throw Error(ErrorKind::parse, "--out-spec auto picks among searched plans; drop --plan article");
  c.options = PlanOptions{o.outer_gather == "A", c.result, element_bytes};
  c.options.time_on = o.objective == "time" ? &hardware_preset(o.preset) : nullptr;
}

// On the root: the assembled result against the unsharded einsum, the ledger against the plan, and
// the run's table. Returns the result.
Tensor verify_run(std::ostream& out, Report& rep, const Mesh& mesh, const Contraction& c, const Plan& plan,
                  const ContractionInputs& in, const RunResult& run, DType dtype, bool broadcast) {
  std::vector<Tensor> blocks;
  for (const auto& d : run.outputs) blocks.push_back(d.at(c.result));
  const Assembly got = assemble(mesh, plan.out_spec, plan.out_shape, blocks, c.result);
  // The one checker's value and bound (program_check.hpp): exact, tolerance 0, while integer
  // sums are; else checked_reference's per-element bound. An exact value is checked against the
  // broadcast-and-sum einsum as well, independent of BLAS, when its table of products fits.
  const ExpectedTensor expected = contraction_expected(c.eq, in.a, in.b, dtype, mesh.devices());
  const bool exact = expected.exact;
  const Tensor& want = exact && broadcast ? reference_einsum(c.eq, in.a, in.b) : expected.value;
  Verdict v = exact ? compare(c.result, got.tensor, want, 0.0) : compare(c.result, got.tensor, want, expected.bound);
  if (!got.replicas_agree) {
    v.pass = false;
    v.detail = got.disagreement + (v.detail.empty() ? "" : "; " + v.detail);
  }
  v.name = c.result + " against the unsharded einsum (" +
           (exact && broadcast ? "broadcast and sum" : exact ? "BLAS on one device" : "the program checker") + ")";
  rep.checks.push_back(v);
  Verdict agrees;
  agrees.name = "ledger matches the plan";
  agrees.detail = plan_vs_ledger(plan, rep.collectives);
  agrees.pass = agrees.detail.empty();
  rep.checks.push_back(agrees);

  const double share = plan.unsharded_flops() / mesh.devices();
  out << "Run:\n" << collectives_table(rep.collectives)
      << "  FLOPs per device:  " << plan.flops_per_device() << "; unsharded " << plan.unsharded_flops() << " / "
      << mesh.devices() << " devices = " << share << ": " << plan.flops_per_device() / share << "x the work needed\n"
      << "  memory per device: " << plan.working_bytes() << " bytes (A and B as multiplied, the product); "
      << plan.stored_bytes() << " at rest (the given blocks and C)\n";
  for (const auto& check : rep.checks) out << "  " << check.name << ": " << check.line() << "\n";
  return got.tensor;
}

// The file --out writes, and its type: --out-dtype; else the inputs' type when they came from .npy
// files; else --dtype's, with float32 for bfloat16 (numpy has none, and float32 holds every
// bfloat16 value exactly).
struct OutFile {
  std::string path;  // empty: no --out
  NpyType type = NpyType::float64;
  bool bf16_as_f32 = false;
};

OutFile out_file(const ContractionOptions& o, const ContractionInputs& in, DType dtype) {
  OutFile f;
  f.path = o.out;
  f.type = !o.out_dtype.empty()           ? parse_npy_type(o.out_dtype)
           : in.from_files()              ? in.type
           : dtype == DType::float64      ? NpyType::float64
                                          : NpyType::float32;
  f.bf16_as_f32 = o.out_dtype.empty() && !in.from_files() && dtype == DType::bfloat16;
  return f;
}

// The result to --out, when it verified: 0, or 2 (float16 cannot hold it), or 3 (the write failed).
// The path was checked up front, so a write that fails now (a full disk) is a runtime fault.
int write_result(std::ostream& out, Report& rep, const OutFile& f, const std::string& result, const Tensor& got,
                 const Shape& shape) {
  if (f.path.empty()) return 0;
  if (!rep.pass()) {
    std::cerr << "shardlab: not writing " << f.path << ": the result did not verify\n";
    return 0;
  }
  const double largest = xt::amax(xt::abs(got))();
  if (f.type == NpyType::float16 && largest > 65504) {
    std::cerr << "shardlab: not writing " << f.path << ": " << result << " holds " << largest
              << ", beyond float16's largest finite value 65504; use --out-dtype float32\n";
    return 2;
  }
  try {
    save_npy(f.path, got, f.type);
    out << "  wrote " << f.path << " (" << npy_type_name(f.type)
        << (f.bf16_as_f32 ? ", which holds the bfloat16 result exactly" : "") << ", " << shape_text(shape) << ")\n";
    rep.strings["out"] = f.path;
  } catch (const Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 3;
  }
  return 0;
}

int run_contraction(const ContractionOptions& o) {
  check_flags(o);
  Session session(o.einsum ? "einsum" : "matmul", o.common, !o.plan_only);
  const Mesh& mesh = session.mesh();
  Contraction c = read_specs(o);
  const Einsum& eq = c.eq;
  ContractionInputs in = read_inputs(eq, sizes_asked(o), o.einsum, o.a_in, o.b_in, o.common.seed);
  const OutFile file = out_file(o, in, session.dtype());
  read_plan_choices(o, in, session.element_bytes(), c);
  const SearchResult found = o.plan != "search" ? SearchResult{}
                             : c.auto_out      ? search_cheapest_output(eq, mesh, c.a, c.b, c.options)
                                               : search_contraction(eq, mesh, c.a, c.b, c.out_spec, c.options);
  const Plan plan = o.plan == "search" ? found.best : plan_contraction(eq, mesh, c.a, c.b, c.out_spec, c.options);
  double terms = 1;
  for (const auto& kv : eq.sizes(in.shape_a, in.shape_b)) terms *= static_cast<double>(kv.second);
  const bool broadcast = terms <= kBroadcastLimit;
  if (!o.plan_only)  // before any output
    refuse_if_over_memory(predicted_run_bytes(plan, in, terms, broadcast, o.common.backend == "mpi" ? 1 : mesh.devices()),
                          "this run", "see its plan with --plan-only, or give smaller sizes");
  // Products added into each element of C: the same in the sharded run and the reference, in
  // different orders (the tolerance's n, and the overflow bound's).
  std::size_t summed = 1;
  for (char letter : eq.contracted()) summed *= plan.a.shape[eq.a.find(letter)];
  if (!o.plan_only) {
    fill_random(in, o.common.seed);
    round_inputs(in, eq, session.dtype(), summed, broadcast, c.result);  // on every rank, before anything runs
  }
  auto& out = session.out();
  out << "shardlab " << (o.einsum ? "einsum " : "matmul ") << eq.text() << ": " << plan.a.name << " "
      << shape_text(in.shape_a) << ", " << plan.b.name << " " << shape_text(in.shape_b) << " (" << in.source << ") on mesh " << mesh.text() << ", "
      << o.common.backend << " backend\n\n"
      << plan_text(plan) << "\n";
  auto& rep = session.report();
  print_uneven(out, rep, mesh, c, plan);
  rep.strings["plan_kind"] = o.plan;
  if (o.plan == "search") print_search(out, rep, mesh, c, found, plan, o.explain);
  report_plan(rep, mesh, c, plan, o.plan_only);
  if (o.plan_only) {
    if (session.runtime().is_root() && o.common.json) std::cout << report_json(rep) << std::endl;
    return 0;
  }
  RunResult run = session.run(plan_spmd(plan, in.a, in.b));
  int io_status = 0;
  if (session.runtime().is_root()) {
    const Tensor got = verify_run(out, rep, mesh, c, plan, in, run, session.dtype(), broadcast);
    io_status = write_result(out, rep, file, c.result, got, plan.out_shape);
  }
  if (const int status = session.runtime().agree(io_status); status != 0) return status;
  return session.finish();
}

Command add_contraction(CLI::App& app, bool einsum) {
  auto o = std::make_shared<ContractionOptions>();
  o->einsum = einsum;
  CLI::App* c;
  if (einsum) {
    c = app.add_subcommand("einsum", "plan, run and verify a sharded einsum of two operands, e.g. bsm,mh->bsh");
    c->add_option("equation", o->equation, "the einsum, like bsm,mh->bsh")->required();
    c->add_option("--specs", o->specs, "the specs of A and B, like X,_,Y X,Y")->required()->expected(2);
    c->add_option("--dims", o->dims, "dim sizes, like b=8,s=4,m=16,h=32 (or read from --a-in/--b-in)");
  } else {
    c = app.add_subcommand("matmul", "plan, run and verify a sharded matmul C = A B");
    c->add_option("--a-spec", o->a_spec, "spec of A (m x k), like _,Y")->required();
    c->add_option("--b-spec", o->b_spec, "spec of B (k x n), like Y,_")->required();
    c->add_option("--shape", o->shape, "m,k,n (default 4,16,4, or read from --a-in/--b-in)");
  }
  add_common(c, *o);
  return {c, [o] {
            if (o->common.collectives != "ring" && o->common.collectives != "native")
              throw Error(ErrorKind::parse, "--collectives is '" + o->common.collectives + "'; use ring or native");
            return run_contraction(*o);
          }};
}

}  // namespace

Command add_matmul_command(CLI::App& app) { return add_contraction(app, false); }
Command add_einsum_command(CLI::App& app) { return add_contraction(app, true); }

}  // namespace shardlab
