// Lesson 12 - multi-head self-attention, sharded three ways (articles 001 and 003).
//
// One idea: attention's heads never talk to each other until the output projection adds them up,
// so heads are the natural axis to split. Split by heads (Megatron: W_q, W_k, W_v by columns, W_o
// by rows) the whole block costs one AllReduce forward and one backward, as article 003 says
// pairwise sharding does. Article 001 leaves attention as an exercise on its 2x4 mesh with ESM2's
// kernels q/k/v [embed, heads, head] -> X,Y,_ and out_proj [heads, head, embed] -> Y,_,X: that
// layout moves small blocks of everything instead. Split the keys instead (sequence sharding) and
// the softmax over keys needs a max and a sum across devices, and p v one more sum.
//
// The block is one program, forward and backward (derived by rule, harness/plan/gradient.hpp):
// q, k, v projections with heads n and head size d, scores, a softmax over keys written out
// (its max a stop_gradient), the weighted sum of values, the output projection. Each layout is
// only a different set of annotations; propagation and the planner do the rest.
//
// Run:    build/bin/12_attention [--mesh X=2,Y=4] [--json]
//         mpiexec -n 8 build/bin/12_attention --backend mpi
// Prints: the mesh; the program; the specs of the main tensors under each layout; each layout's
//         collectives forward and backward with bytes per device and peak memory; the verdict
//         of each against the unsharded block and central differences.
#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/text.hpp"
#include "harness/check/case_file.hpp"
#include "harness/check/session.hpp"
#include "core/table.hpp"
#include "harness/cli/cli.hpp"
#include "harness/models/case_run.hpp"

using namespace shardlab;

namespace {

// Keys come from the same x as queries, under their own sequence letter t (rename).
const char* kDims = "b=2,s=8,t=8,m=16,n=8,d=4";
const char* kBlock = R"(inputs = { x = "bsm", W_q = "mnd", W_k = "mnd", W_v = "mnd", W_o = "ndm" }
ops = [
  { out = "x_t", op = "rename", in = ["x"], to = "btm" },
  { out = "q", op = "einsum", eq = "bsm,mnd->bsnd", in = ["x", "W_q"] },
  { out = "k", op = "einsum", eq = "btm,mnd->btnd", in = ["x_t", "W_k"] },
  { out = "v", op = "einsum", eq = "btm,mnd->btnd", in = ["x_t", "W_v"] },
  { out = "scores", op = "einsum", eq = "bsnd,btnd->bnst", in = ["q", "k"] },
  { out = "scaled", op = "scale", in = ["scores"], value = 0.5 },
  { out = "row_max", op = "max", in = ["scaled"], over = "t" },
  { out = "top", op = "stop_gradient", in = ["row_max"] },
  { out = "shifted", op = "sub", in = ["scaled", "top"] },
  { out = "e", op = "exp", in = ["shifted"] },
  { out = "z", op = "sum", in = ["e"], over = "t" },
  { out = "p", op = "div", in = ["e", "z"] },
  { out = "o", op = "einsum", eq = "bnst,btnd->bsnd", in = ["p", "v"] },
  { out = "y", op = "einsum", eq = "bsnd,ndm->bsm", in = ["o", "W_o"] },
]
outputs = ["y"]
backward = true
)";

struct Layout {
  std::string name, what, shard;  // shard: A and B stand for the mesh's two axes
};

const std::vector<Layout> kLayouts = {
    {"megatron", "heads split over all devices: W_q, W_k, W_v by columns, W_o by rows",
     R"({ x = "_,_,_", W_q = "_,(A,B),_", W_k = "_,(A,B),_", W_v = "_,(A,B),_", W_o = "(A,B),_,_" })"},
    {"gspmd_2d", "article 001's rules: batch->A, heads->B, embed_kernel->A, embed->B",
     R"({ x = "A,_,B", W_q = "A,B,_", W_k = "A,B,_", W_v = "A,B,_", W_o = "B,_,A" })"},
    {"sequence", "keys split over all devices; weights replicated",
     R"({ x = "_,_,_", x_t = "_,(A,B),_", W_q = "_,_,_", W_k = "_,_,_", W_v = "_,_,_" })"},
};

// The block's dims ("b=2,s=8,..."), split as the three layouts need on axes of a and c devices (b
// over the first axis, m over either, n and t over both); else one short sentence naming meshes
// that do.
std::map<std::string, long> block_dims(const std::string& text, long a, long c) {
  std::map<std::string, long> dims;
  for (const std::string& kv : split(text, ',')) {
    const auto eq = kv.find('=');
    const std::string name = trim(kv.substr(0, eq)), value = eq == std::string::npos ? "" : trim(kv.substr(eq + 1));
    if (value.empty() || value.size() > 6 || !std::all_of(value.begin(), value.end(), ::isdigit) || std::stol(value) == 0 ||
        std::string("b s t m n d").find(name) == std::string::npos || name.size() != 1)
      throw Error(ErrorKind::parse, "--dims " + excerpt(text) + ": give b, s, t, m, n and d as positive whole numbers, "
                                    "like " + kDims);
    dims[name] = std::stol(value);
  }
  if (dims.size() != 6) throw Error(ErrorKind::parse, std::string("--dims needs all of b, s, t, m, n and d, like ") + kDims);
  const std::map<std::string, long> need = {{"b", a}, {"m", std::lcm(a, c)}, {"n", a * c}, {"t", a * c}};
  std::string fix, why;
  for (const auto& [name, k] : need)
    if (dims[name] % k != 0) {
      why += (why.empty() ? "" : ", ") + name + " = " + std::to_string(dims[name]) + " over " + std::to_string(k);
    }
  if (!why.empty())
    throw Error(ErrorKind::not_divisible, "lesson 12 cannot split its block here (" + why +
                                              "): use a mesh like X=2,Y=4 or X=1,Y=8");
  return dims;
}

// "all_gather x over Y" lines joined, wrapped to `width` columns after `indent`.
std::string wrapped(const std::vector<std::string>& items, std::size_t indent, std::size_t width = 96) {
  std::string out, line;
  for (const auto& s : items) {
    if (!line.empty() && indent + line.size() + 2 + s.size() > width) {
      out += line + ",\n" + std::string(indent, ' ');
      line.clear();
    }
    line += (line.empty() ? "" : ", ") + s;
  }
  return out + (line.empty() ? "none" : line);
}

}  // namespace

int main(int argc, char** argv) {
  Cli cli("12_attention", "Lesson 12: multi-head self-attention sharded by heads, in 2D and by keys", "X=2,Y=4");
  cli.inputs_option();  // --inputs FILE.npz: named input tensors read from it
  const std::string dims_text = kDims;  // other sizes change which plan is cheapest, and the lesson's claims
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    Session session("12_attention", cli.common);
    const Mesh& mesh = session.mesh();
    if (mesh.rank() != 2) throw Error(ErrorKind::parse, "lesson 12 needs a 2-axis mesh like X=2,Y=4, not " + mesh.text());
    const std::string A = mesh.names()[0], B = mesh.names()[1];
    std::string block = "dims = { ";
    for (const auto& [name, size] : block_dims(dims_text, mesh.axis_size(A), mesh.axis_size(B)))
      block += name + " = " + std::to_string(size) + ", ";
    block = block.substr(0, block.size() - 2) + " }\n" + kBlock;
    auto& out = session.out();
    out << "1. Mesh " << mesh.text() << ":\n" << mesh.picture() << "\n";

    std::vector<CaseFile> cases;
    std::vector<ProgramPlan> plans;
    for (const auto& l : kLayouts) {
      cases.push_back(layout_case(block, "shard = " + l.shard, "attention_" + l.name, session, cli.common.seed));
      plans.push_back(plan_case(cases.back(), mesh));
    }
    const TensorProgram& forward = cases[0].program;
    out << "2. The block as a program (b batch, s queries, t keys, m embed, n heads, d head size):\n"
        << program_text(forward)
        << "   Its backward (" << plans[0].program.ops.size() - forward.ops.size()
        << " more ops) is derived by rule from these, as in lesson 11.\n\n";

    out << "3. Three layouts, each a few annotations; propagation gives every other tensor its spec:\n";
    Table specs({"tensor", "dims", "megatron", "gspmd_2d", "sequence"});
    for (const char* t : {"x", "W_q", "W_o", "k", "scores", "p", "o", "y"}) {
      std::vector<std::string> row = {t, forward.dims.at(t)};
      for (const auto& p : plans) row.push_back(p.propagation.specs.at(t).spec.text());
      specs.add(row);
    }
    out << specs.text();
    for (const auto& l : kLayouts) out << "   " << l.name << ": " << with_mesh_axes(l.what, mesh) << "\n";
    out << "   Article 001's ESM2 kernels: q/k/v [5120, 40, 128] as (embed_kernel, heads, None) -> "
        << A << "," << B << ",_\n   and out_proj [40, 128, 5120] as (heads, None, embed_kernel) -> " << B << ",_," << A
        << ", here at 1/320 of the embed\n   and 1/5 of the heads.\n\n";

    std::vector<CaseRun> runs;
    // The gradient rules against central differences are the program's, not a layout's: once.
    for (std::size_t i = 0; i < cases.size(); ++i) {
      session.name_runs(kLayouts[i].name);  // --json: each collective says which layout ran it
      runs.push_back(run_case(session, cases[i], plans[i], i == 0));
    }
    if (!session.runtime().is_root()) return session.finish();

    Report& report = session.report();
    out << "4. Communication, measured by the ledger (bytes sent by the busiest device, whole step):\n";
    Table t({"layout", "forward", "backward", "bytes/device", "peak bytes/device"});
    for (std::size_t i = 0; i < runs.size(); ++i) {
      std::size_t fwd = 0;
      for (std::size_t j = 0; j < forward.ops.size(); ++j) fwd += plans[i].ops[j].collectives().size();
      const auto& c = runs[i].collectives;
      auto count = [](std::size_t n) { return std::to_string(n) + (n == 1 ? " collective" : " collectives"); };
      t.add({kLayouts[i].name, count(fwd), count(c.size() - fwd),
             std::to_string(runs[i].bytes_per_device), std::to_string(runs[i].peak_bytes)});
      report.numbers[kLayouts[i].name + "_bytes_per_device"] = static_cast<double>(runs[i].bytes_per_device);
      report.numbers[kLayouts[i].name + "_peak_bytes_per_device"] = static_cast<double>(runs[i].peak_bytes);
    }
    out << t.text();
    for (std::size_t i = 0; i < runs.size(); ++i) {
      std::size_t fwd = 0;
      for (std::size_t j = 0; j < forward.ops.size(); ++j) fwd += plans[i].ops[j].collectives().size();
      const auto& c = runs[i].collectives;
      const std::string head = "   " + kLayouts[i].name + " forward:  ";
      out << head << wrapped({c.begin(), c.begin() + static_cast<long>(fwd)}, head.size()) << "\n"
          << std::string(head.size() - 11, ' ') << "backward: "
          << wrapped({c.begin() + static_cast<long>(fwd), c.end()}, head.size()) << "\n";
    }
    out << "   Words: all_reduce_max is an AllReduce that keeps each element's largest value, not the\n"
           "   sum (each softmax row's max, subtracted before exp so it cannot overflow); all_to_all moves\n"
           "   a split from one dim to another (lesson 11). dx_2 is the second of dx's terms (x feeds\n"
           "   several ops; the derived backward names each term and adds them). \"over Y,X\" is the same\n"
           "   devices as \"over X,Y\" in the other order: the order of the dim's split, (Y,X).\n";
    out << "   By heads, every score, softmax and weighted sum is a device's own: only y's partial sums\n"
        << "   over the heads meet, and backward only dx's (x feeds all three projections; their\n"
        << "   gradients are added as partial sums first). By keys, each softmax row is spread over the\n"
        << "   devices: its max, its sum and p v are completed across them, and W_k, W_v's gradients too.\n\n";

    out << "5. Verdict against the unsharded block (outputs, gradients) and central differences:\n";
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const int passed = add_layout_checks(report, kLayouts[i].name, runs[i], out);
      out << "   " << kLayouts[i].name << ": " << passed << " of " << runs[i].checks.size() << " checks pass\n";
    }
    out << "   (each layout: y and the 5 gradients against the unsharded block, the ledger against the\n"
        << "   plan, the peak memory against the plan)\n";
    const int rules = add_rule_checks(report, runs[0], out);
    out << "   gradient rules, once for the program (float64 central differences of the unsharded block,\n"
        << "   on inputs of their own; the same in every layout): " << rules << " of " << runs[0].rule_checks.size()
        << " pass\n";
    Verdict megatron;
    const auto& ran = runs[0].collectives;
    if (mesh.devices() == 1) {  // a group of one device sums nothing: no collective is the right count
      megatron.name = "megatron: on one device nothing moves";
      megatron.pass = ran.empty();
    } else {
      megatron.name = "megatron: one AllReduce forward and one backward";
      megatron.pass = ran.size() == 2 && ran[0].rfind("all_reduce y over ", 0) == 0 &&
                      ran[1].rfind("all_reduce dx over ", 0) == 0;
    }
    if (!megatron.pass) megatron.detail = "ran " + join(runs[0].collectives, "; ");
    report.checks.push_back(megatron);
    out << "   " << megatron.name << ": " << check_text(megatron) << "\n"
        << "\nTakeaway: heads are independent until the output projection sums them, so splitting heads\n"
           "          costs one AllReduce each way; splitting keys puts a collective inside the softmax.\n"
           "Next:     build/bin/shardlab run harness/cases/attention_megatron.toml\n"
           "          the by-heads layout as a case file for CI, smaller: 4 heads on a line of 4 devices,\n"
           "          so its AllReduces move 1536 B per device, not this lesson's "
        << runs[0].bytes_per_device << ".\n"
           "Exercise: build/bin/shardlab exercise --lesson 12\n";
    return session.finish();
  });
}
