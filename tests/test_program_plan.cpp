// harness/plan/program_plan.cpp: whole programs planned op by op and run on the sim mesh; each
// output stitched from the devices equals the unsharded program within the reference's bounds
// (harness/check/program_check.hpp), the ledger makes exactly the planned collectives with the
// planned bytes, and the peak each device held is the one predicted from the specs.
#include <doctest/doctest.h>

#include <string>

#include "collectives/runtime.hpp"
#include "core/layout.hpp"
#include "harness/check/case_file.hpp"
#include "harness/check/program_check.hpp"
#include "harness/check/report.hpp"
#include "harness/check/verify.hpp"
#include "harness/plan/program_plan.hpp"

using namespace shardlab;

namespace {

struct Ran {
  ProgramPlan plan;
  std::vector<CollectiveSummary> collectives;
  bool verified = true;
  double peak = 0;
};

Ran run_text(const std::string& body, const std::string& mesh_text, const std::map<std::string, std::string>& shard,
             DType dtype = DType::float32) {
  const CaseFile c = parse_case_file("name = \"t\"\nmesh = \"" + mesh_text + "\"\n" + body, "t.toml");
  const Mesh mesh = Mesh::parse(mesh_text);
  Ran r;
  r.plan = plan_tensor_program(c.program, mesh, propagate(c.program, mesh, shard), dtype);
  const auto inputs = program_inputs(c.program, 1);
  Runtime rt(Backend::sim, false, dtype);
  const RunResult run = rt.run(mesh, program_spmd(r.plan, inputs));
  r.collectives = summarize(run.ledger);
  const ProgramReference ref = run_reference(c.program, inputs, dtype, mesh.devices(), partial_groups(r.plan));
  for (const auto& name : c.program.outputs) {
    std::vector<Tensor> blocks;
    for (const auto& out : run.outputs) blocks.push_back(out.at(name));
    const Assembly a = assemble(mesh, r.plan.propagation.specs.at(name).spec, c.program.shape(name), blocks, name);
    const Verdict v = compare(name, a.tensor, ref.values.at(name), ref.bounds.at(name));
    CAPTURE(v.line());
    CHECK(v.pass);
    CHECK(a.replicas_agree);
    r.verified = r.verified && v.pass && a.replicas_agree;
  }
  for (const auto& out : run.outputs) r.peak = std::max(r.peak, out.at("peak_bytes")(0));
  CHECK(r.peak == double(predicted_peak_bytes(r.plan)));
  // The ledger: the plan's collectives in order, each with its predicted bytes.
  const auto lines = r.plan.collective_lines();
  REQUIRE(lines.size() == r.collectives.size());
  const auto steps = r.plan.collectives();
  for (std::size_t i = 0; i < steps.size(); ++i) {
    CHECK(lines[i] == r.collectives[i].op + " " + r.collectives[i].tensor + " over " + r.collectives[i].axes);
    CHECK(steps[i]->predicted_bytes == r.collectives[i].bytes_per_device);
  }
  return r;
}

const std::string kFfn = R"(dims = { b = 8, s = 4, m = 16, h = 64 }
inputs = { x = "bsm", W_in = "mh", W_out = "hm" }
ops = [
  { out = "h", op = "einsum", eq = "bsm,mh->bsh", in = ["x", "W_in"] },
  { out = "g", op = "gelu", in = ["h"] },
  { out = "y", op = "einsum", eq = "bsh,hm->bsm", in = ["g", "W_out"] },
]
outputs = ["y"]
)";

}  // namespace

TEST_CASE("program run: the GSPMD FFN makes lesson 08's collectives and bytes, in every element type") {
  for (DType t : {DType::float32, DType::float64, DType::bfloat16}) {
    CAPTURE(dtype_text(t));
    const Ran r = run_text(kFfn, "X=2,Y=4", {{"x", "X,_,Y"}, {"W_in", "X,Y"}, {"W_out", "Y,X"}}, t);
    CHECK(r.plan.collective_lines() == std::vector<std::string>{"all_gather x over Y", "all_gather W_in over X",
                                                                "all_gather W_out over X", "reduce_scatter y over Y"});
    // Lesson 08 in float32: 768, 512, 512 and 768 bytes per device; other types scale with their size.
    const std::size_t eb = element_bytes(t);
    CHECK(r.plan.predicted_bytes_per_device() == 2560 / 4 * eb);
  }
}

TEST_CASE("program run: bias by name, reductions over split dims, max, mean and softmax") {
  const std::string body = R"(dims = { b = 4, s = 2, h = 8 }
inputs = { x = "bsh", bias = "h", w = "bs" }
ops = [
  { out = "xb", op = "add", in = ["x", "bias"] },
  { out = "t", op = "tanh", in = ["xb"] },
  { out = "sq", op = "square", in = ["t"] },
  { out = "total", op = "sum", over = "h", in = ["sq"] },
  { out = "avg", op = "mean", over = "bh", in = ["sq"] },
  { out = "top", op = "max", over = "h", in = ["t"] },
  { out = "p", op = "softmax", over = "h", in = ["t"] },
  { out = "pw", op = "mul", in = ["w", "total"] },
  { out = "e", op = "exp", in = ["pw"] },
  { out = "r", op = "relu", in = ["xb"] },
  { out = "n", op = "neg", in = ["r"] },
  { out = "eb", op = "exp", in = ["bias"] },
  { out = "d", op = "div", in = ["n", "eb"] },
]
outputs = ["total", "avg", "top", "p", "e", "d"]
)";
  // h split over Y: the sum leaves partial sums over Y (completed by an AllReduce or a
  // ReduceScatter), max takes each device's maxima and an all-reduce of max completes them,
  // softmax needs h whole.
  const Ran r = run_text(body, "X=2,Y=4", {{"x", "X,_,Y"}});
  CHECK(r.verified);
  bool completed = false, gathered = false, maxed = false;
  for (const auto& c : r.collectives) {
    completed = completed || ((c.op == "all_reduce" || c.op == "reduce_scatter") && c.tensor == "total");
    gathered = gathered || (c.op == "all_gather" && c.axes == "Y");
    // top [b, s] = [4, 2] lies as X,_: 4 floats per device, 2(n-1)/n of them over Y=4.
    if (c.op == "all_reduce_max") {
      maxed = c.tensor == "top" && c.axes == "Y" && c.bytes_per_device == 2 * 3 * 4 * 4 / 4;
      CHECK(c.matches());
    }
  }
  CHECK(completed);
  CHECK(gathered);
  CHECK(maxed);
  // Replicated: no collectives at all, the same values.
  const Ran plain = run_text(body, "X=2,Y=4", {});
  CHECK(plain.collectives.empty());
}

TEST_CASE("program run: an unannotated weight takes its layout back through the einsum") {
  const Ran r = run_text(kFfn, "X=2,Y=4", {{"x", "X,_,Y"}});
  CHECK(r.verified);
  CHECK(r.plan.propagation.specs.at("W_in").origin.find("back through op 1") != std::string::npos);
}

TEST_CASE("program run: the bounds catch a plan that leaves partial sums unreduced") {
  const std::string body = R"(name = "t"
mesh = "Y=4"
dims = { b = 4, h = 8 }
inputs = { x = "bh" }
shard = { x = "_,Y" }
ops = [ { out = "total", op = "sum", over = "h", in = ["x"] } ]
outputs = ["total"]
)";
  const CaseFile c = parse_case_file(body, "t.toml");
  const Mesh mesh = Mesh::parse("Y=4");
  // The rules' layout (total replicated, so an AllReduce); the layout search would reduce-scatter it.
  ProgramPlan plan =
      plan_tensor_program(c.program, mesh, propagate(c.program, mesh, c.shard, {}, false), DType::float32);
  REQUIRE(plan.ops[0].finish.size() == 1);
  CHECK(plan.ops[0].finish[0].kind == StepKind::all_reduce);
  const auto inputs = program_inputs(c.program, 2);
  const ProgramReference ref = run_reference(c.program, inputs, DType::float32, 4);
  for (bool sabotage : {false, true}) {
    CAPTURE(sabotage);
    ProgramPlan p = plan;
    if (sabotage) p.ops[0].finish.clear();  // each device keeps its own partial sum
    Runtime rt(Backend::sim, false, DType::float32);
    const RunResult run = rt.run(mesh, program_spmd(p, inputs));
    std::vector<Tensor> blocks;
    for (const auto& out : run.outputs) blocks.push_back(out.at("total"));
    const Assembly a = assemble(mesh, Spec::parse("_"), {4}, blocks, "total");
    const Verdict v = compare("total", a.tensor, ref.values.at("total"), ref.bounds.at("total"));
    CHECK(v.pass == (!sabotage && a.replicas_agree));
  }
}

TEST_CASE("program run: a gathered tensor is gathered once per pass, for every einsum that reads it or its rename") {
  // x split over s on Y=4; q, k, v each need x whole (their weights split by heads). k and v read
  // x_t = rename(x), and a gelu stands between q and k: the copy of x that q's einsum gathered
  // serves k and v too. x[2,8,16] float32 is 1024 B; one all_gather over 4 devices sends 3/4 of
  // it: 768 B, once (before, x_t was gathered again for k: 1536 B).
  const std::string body = R"(dims = { b = 2, s = 8, t = 8, m = 16, n = 4, d = 4 }
inputs = { x = "bsm", W_q = "mnd", W_k = "mnd", W_v = "mnd" }
ops = [
  { out = "x_t", op = "rename", in = ["x"], to = "btm" },
  { out = "q", op = "einsum", eq = "bsm,mnd->bsnd", in = ["x", "W_q"] },
  { out = "gq", op = "gelu", in = ["q"] },
  { out = "k", op = "einsum", eq = "btm,mnd->btnd", in = ["x_t", "W_k"] },
  { out = "v", op = "einsum", eq = "btm,mnd->btnd", in = ["x_t", "W_v"] },
]
outputs = ["gq", "k", "v"]
)";
  const Ran r = run_text(body, "Y=4",
                         {{"x", "_,Y,_"}, {"W_q", "_,Y,_"}, {"W_k", "_,Y,_"}, {"W_v", "_,Y,_"},
                          {"gq", "_,_,Y,_"}, {"k", "_,_,Y,_"}, {"v", "_,_,Y,_"}});
  CHECK(r.plan.collective_lines() == std::vector<std::string>{"all_gather x over Y"});
  CHECK(r.plan.predicted_bytes_per_device() == 768);
  CHECK(r.plan.ops[3].reuse[0]);
  CHECK(r.plan.ops[3].reuse_op[0] == 1);  // the copy op 2 (q) made
  CHECK(r.plan.ops[4].reuse[0]);
  CHECK(program_plan_text(r.plan).find("(x's copy, moved for op 2)") != std::string::npos);
  // The copy (x[2,8,16] whole, 1024 B) is held from q's einsum to v's. By hand, blocks of 256 B
  // each: at q's einsum a device holds x, x_t and the three weights (1280), the copy and q: 2560,
  // the peak; at v's, x_t, W_v, gq, k, the copy and v: 2304 (x and W_q freed, W_k after k).
  CHECK(r.peak == 2560);
}
