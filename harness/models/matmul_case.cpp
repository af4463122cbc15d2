#include "harness/models/matmul_case.hpp"

#include <algorithm>
#include <map>
#include <sstream>

#include "core/memory.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "core/layout.hpp"
#include "harness/check/pictures.hpp"
#include "harness/check/program_check.hpp"
#include "harness/plan/plan_search.hpp"
#include "harness/plan/search_text.hpp"
#include "harness/check/report.hpp"
#include "harness/check/plan_ledger.hpp"

namespace shardlab {

namespace {
const Einsum& matmul_eq() {
  static const Einsum eq = Einsum::parse("ik,kj->ij");
  return eq;
}


// The smallest and largest value of scalar output `name` over the devices.
std::pair<double, double> range_of(const RunResult& run, const std::string& name) {
  double lo = 0, hi = 0;
  bool first = true;
  for (const auto& out : run.outputs) {
    auto it = out.find(name);
    if (it == out.end() || it->second.size() != 1)
      throw Error(ErrorKind::device, "a device did not report its " + name);
    const double v = it->second.data()[0];
    lo = first ? v : std::min(lo, v);
    hi = first ? v : std::max(hi, v);
    first = false;
  }
  return {lo, hi};
}

std::string range_text(std::pair<double, double> r, const std::string& unit = "") {
  return r.first == r.second ? shortest(r.first) + unit + " on every device"
                             : shortest(r.first) + " to " + shortest(r.second) + unit + " by device";
}
}  // namespace

Verdict verify_matmul(const Mesh& mesh, const Spec& spec, const RunResult& run, const std::string& name,
                      const MatmulCase& c, DType t) {
  const ExpectedTensor e = contraction_expected(matmul_eq(), c.a, c.b, t, mesh.devices());
  // Exact: against c.want, the broadcast-and-sum product (no BLAS, which the devices use too).
  if (e.exact) return verify_output(mesh, spec, run, name, c.want, 0.0);
  return verify_output(mesh, spec, run, name, e.value, e.bound);
}

Spec case_spec(const Mesh& mesh, const std::string& spec_xy) {
  if (mesh.rank() != 2)
    throw Error(ErrorKind::parse, "this case needs a mesh with two axes, like X=2,Y=4; mesh " + mesh.text() + " has " +
                                      std::to_string(mesh.rank()) + (mesh.rank() == 1 ? " axis" : " axes"));
  Spec s = Spec::parse(spec_xy);
  auto rename = [&](std::vector<std::string>& axes) {
    for (auto& a : axes) a = a == "X" ? mesh.names()[0] : a == "Y" ? mesh.names()[1] : a;
  };
  for (auto& d : s.dims) rename(d);
  rename(s.partial);
  return s;
}

MatmulCase matmul_case(const Mesh& mesh, const std::string& shape, const std::string& a_spec_xy,
                       const std::string& b_spec_xy, std::uint64_t seed, std::size_t element_bytes) {
  MatmulCase c;
  c.a_spec = case_spec(mesh, a_spec_xy);
  c.b_spec = case_spec(mesh, b_spec_xy);
  c.x = mesh.names()[0];
  c.y = mesh.names()[1];
  const Shape mkn = parse_shape(shape, "--shape");
  if (mkn.size() != 3)
    throw Error(ErrorKind::parse, "--shape has " + std::to_string(mkn.size()) + " sizes; expected m,k,n like 4,16,4");
  c.m = mkn[0], c.k = mkn[1], c.n = mkn[2];
  c.plan = plan_contraction(matmul_eq(), mesh, {"A", c.a_spec, {c.m, c.k}}, {"B", c.b_spec, {c.k, c.n}}, std::nullopt,
                            {false, "C", element_bytes});
  // Before allocating: the reference's table of m*k*n products, the operands and result (float64,
  // a few copies) and every device's blocks (all of them in this process on sim; a bound under MPI).
  const double m = static_cast<double>(c.m), k = static_cast<double>(c.k), n = static_cast<double>(c.n);
  refuse_if_over_memory(8 * m * k * n + 8 * 4 * (m * k + k * n + m * n) +
                            mesh.devices() * static_cast<double>(c.plan.stored_bytes() + c.plan.working_bytes()),
                        "--shape " + shape, "give smaller sizes");
  c.a = random_integers({c.m, c.k}, seed, -4, 4);
  c.b = random_integers({c.k, c.n}, seed + 1, -4, 4);
  c.want = reference_einsum(matmul_eq(), c.a, c.b);
  return c;
}

Plan case_plan(const Mesh& mesh, const MatmulCase& c, const std::string& a_spec_xy, const std::string& b_spec_xy) {
  return plan_contraction(matmul_eq(), mesh, {"A", case_spec(mesh, a_spec_xy), {c.m, c.k}},
                          {"B", case_spec(mesh, b_spec_xy), {c.k, c.n}}, std::nullopt,
                          {false, "C", c.plan.element_bytes});
}

std::string article_form(const Spec& spec) {
  std::string out;
  for (const auto& axes : spec.dims) {
    std::string dim = axes.empty() ? "full" : "sharded_";
    for (const auto& a : axes) dim += a;
    out += (out.empty() ? "(" : ", ") + dim;
  }
  return out + ")";
}

int article_device(const Mesh& mesh) {
  if (mesh.rank() != 2 || mesh.axis_size(mesh.names()[1]) < 2) return -1;
  return mesh.device({0, 1});
}

std::string inputs_text(const Mesh& mesh, const MatmulCase& c) {
  const Shape as{c.m, c.k}, bs{c.k, c.n};
  std::string out = "   In article 001's form: A: " + article_form(c.a_spec) + ", B: " + article_form(c.b_spec) + "\n";
  out += "   " + layout_summary(mesh, c.a_spec, as, "A", {"I", "K"}) + "; rows:cols per device\n" +
         blocks_picture(mesh, c.a_spec, as) + "   " + layout_summary(mesh, c.b_spec, bs, "B", {"K", "J"}) +
         "; rows:cols per device\n" + blocks_picture(mesh, c.b_spec, bs);
  const int d = article_device(mesh);
  if (d >= 0)
    out += "   The article follows the device at " + c.x + "=0, " + c.y + "=1 (d" + std::to_string(d) +
           " here): it holds A" + block_of(mesh, c.a_spec, as, d).text() + " and B" +
           block_of(mesh, c.b_spec, bs, d).text() + ".\n";
  return out;
}

Outputs with_work(Outputs outs, double flops, std::size_t bytes_held) {
  outs["flops"] = Tensor(flops);
  outs["bytes_held"] = Tensor(static_cast<double>(bytes_held));
  return outs;
}

std::string work_text(const Mesh& mesh, const RunResult& run, double unsharded_flops, std::size_t unsharded_bytes) {
  const auto flops = range_of(run, "flops"), bytes = range_of(run, "bytes_held");
  const double share = unsharded_flops / mesh.devices();
  std::ostringstream out;
  out << "   FLOPs per device:  " << range_text(flops) << "; unsharded " << shortest(unsharded_flops) << " / "
      << mesh.devices() << " devices = " << shortest(share) << ": " << shortest(flops.second / share) << "x the work needed\n"
      << "   memory per device: " << range_text(bytes, " bytes") << " (A and B as multiplied, C);\n"
      << "                      unsharded A, B, C: " << unsharded_bytes << " bytes\n";
  return out.str();
}

std::string same_work_groups(const Mesh& mesh, const Plan& plan) {
  std::map<std::string, std::vector<int>> by_blocks;
  std::vector<std::string> order;
  for (int d = 0; d < mesh.devices(); ++d) {
    const std::string key = block_of(mesh, plan.a_used, plan.a.shape, d).text() + " " +
                            block_of(mesh, plan.b_used, plan.b.shape, d).text();
    if (!by_blocks.count(key)) order.push_back(key);
    by_blocks[key].push_back(d);
  }
  std::string out;
  for (const auto& key : order) {
    std::string g;
    for (int d : by_blocks[key]) g += (g.empty() ? "" : ",") + std::to_string(d);
    out += (out.empty() ? "{" : " {") + g + "}";
  }
  return out;
}

std::string cost_text(const Plan& plan) {
  return std::to_string(plan.predicted_bytes_per_device()) + " bytes sent and " + shortest(plan.flops_per_device()) +
         " FLOPs per device";
}

Verdict planner_agrees(const Plan& plan, const std::vector<CollectiveSummary>& run) {
  Verdict v;
  v.name = "planner agrees";
  v.detail = plan_vs_ledger(plan, run);
  v.pass = v.detail.empty();
  return v;
}

CheaperPlan run_cheaper_plan(Runtime& runtime, const Mesh& mesh, const MatmulCase& c, DType dtype) {
  CheaperPlan out;
  const SearchResult found = search_contraction(matmul_eq(), mesh, c.plan.a, c.plan.b, c.plan.out_spec,
                                                {false, "C", c.plan.element_bytes});
  const Plan& best = found.best;
  const std::size_t mine = c.plan.predicted_bytes_per_device(), theirs = best.predicted_bytes_per_device();
  const std::string command = "shardlab matmul --mesh " + mesh.text() + " --a-spec " + c.a_spec.text() + " --b-spec " +
                              c.b_spec.text() + " --shape " + std::to_string(c.m) + "," + std::to_string(c.k) + "," +
                              std::to_string(c.n) + " --explain";
  if (theirs >= mine) {
    out.text = "   The planner's search finds nothing cheaper for these specs: the articles' plan sends the fewest\n"
               "   bytes (" + command + ").\n";
    return out;
  }
  const RunResult run = runtime.run(mesh, plan_spmd(best, c.a, c.b));
  if (!runtime.is_root()) return out;
  Verdict v = verify_matmul(mesh, best.out_spec, run, "C", c, dtype);
  v.name = "C by the searched plan";
  out.checks.push_back(v);
  out.checks.push_back(planner_agrees(best, summarize(run.ledger)));
  out.checks.back().name = "searched plan's bytes as predicted";
  out.text = "   Cheaper: the search sends " + std::to_string(theirs) + " bytes per device instead of " +
             std::to_string(mine) + " (" + times_text(double(mine), double(theirs)) + " less) for the same C\n   (" +
             command + "):\n";
  for (const auto& s : best.steps) {
    if (s.kind == StepKind::contract) {
      out.text += "     contract " + best.a_used.notation("A", {"I", "K"}) + " x " + best.b_used.notation("B", {"K", "J"}) +
                  " -> " + s.after.notation("C", {"I", "J"}) + "\n";
      continue;
    }
    const std::string letters = s.operand == 0 ? "IK" : s.operand == 1 ? "KJ" : "IJ";
    const std::vector<std::string> names = {std::string(1, letters[0]), std::string(1, letters[1])};
    out.text += "     " + step_kind_name(s.kind) + " " + s.tensor + " over " + axes_text(s.axes) + ": " +
                s.before.notation(s.tensor, names) + " -> " + s.after.notation(s.tensor, names) +
                (s.predicted_bytes ? ", " + std::to_string(s.predicted_bytes) + " bytes" : ", no messages") + "\n";
  }
  // The two step kinds the articles' rules never use, explained where a lesson first prints them.
  bool slices = false, swaps = false;
  for (const auto& s : best.steps) {
    slices = slices || s.kind == StepKind::local_slice;
    swaps = swaps || s.kind == StepKind::all_to_all;
  }
  if (slices) out.text += "   (local_slice: a device keeps a slice of what it already holds, cutting a dim further)\n";
  if (swaps)
    out.text += "   (all_to_all: each device cuts its block into n parts and sends part i to device i,\n"
                "   moving the split from one dim to another for (n-1)/n of the block)\n";
  out.text += "   The articles' rules keep to the cases they teach; the search also slices, uses idle mesh axes\n"
              "   and AllToAll, and keeps whichever plan moves the fewest bytes.\n";
  return out;
}

}  // namespace shardlab
