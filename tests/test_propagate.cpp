// harness/plan/propagate.cpp: specs flow from a few annotations to every tensor by the documented
// priorities, each with its origin; invalid annotations are refused naming the tensor.
#include <doctest/doctest.h>

#include <string>

#include "core/error.hpp"
#include "core/text.hpp"
#include "harness/check/case_file.hpp"
#include "harness/models/case_run.hpp"
#include "harness/plan/propagate.hpp"

using namespace shardlab;

namespace {

TensorProgram ffn(const std::string& extra_ops = "") {
  const std::string text = R"(name = "p"
mesh = "X=2,Y=4"
dims = { b = 8, s = 4, m = 16, h = 64 }
inputs = { x = "bsm", W_in = "mh", W_out = "hm", bias = "h" }
ops = [
  { out = "h", op = "einsum", eq = "bsm,mh->bsh", in = ["x", "W_in"] },
  { out = "hb", op = "add", in = ["h", "bias"] },
  { out = "g", op = "gelu", in = ["hb"] },
  { out = "y", op = "einsum", eq = "bsh,hm->bsm", in = ["g", "W_out"] },
  { out = "p", op = "softmax", over = "h", in = ["g"] },
  { out = "r", op = "sum", over = "h", in = ["g"] },)" + extra_ops + R"(
]
outputs = ["y", "p", "r"]
)";
  return parse_case_file(text, "p.toml").program;
}

const Mesh kMesh = Mesh::parse("X=2,Y=4");

}  // namespace

TEST_CASE("propagate: the GSPMD FFN from x, W_in and W_out (article 002)") {
  // Rules 1-6 alone; rule 7, the layout search, is checked at the end.
  const Propagation p = propagate(ffn(), kMesh, {{"x", "X,_,Y"}, {"W_in", "X,Y"}, {"W_out", "Y,X"}}, {}, false);
  CHECK(p.annotated == 3);
  CHECK(p.specs.at("x").origin == "annotated");
  CHECK(p.specs.at("h").spec.text() == "X,_,Y");  // b from x, h from W_in
  CHECK(p.specs.at("h").origin.rfind("from x and W_in through op 1 (h = einsum bsm,mh->bsh", 0) == 0);
  CHECK(p.specs.at("hb").spec.text() == "X,_,Y");
  CHECK(p.specs.at("g").spec.text() == "X,_,Y");
  CHECK(p.specs.at("y").spec.text() == "X,_,Y");  // like x, as the residual add would want
  CHECK(p.specs.at("y").origin == "like x (same dims bsm)");
  CHECK(p.specs.at("p").spec.text() == "X,_,_");  // softmax needs its dim whole
  CHECK(p.specs.at("p").origin.find("dim h whole for the softmax") != std::string::npos);
  CHECK(p.specs.at("r").spec.text() == "X,_");    // the sum drops h
  // The bias, not annotated, takes h's axes back through the add.
  CHECK(p.specs.at("bias").spec.text() == "Y");
  CHECK(p.specs.at("bias").origin.find("back through op 2 (hb = add") != std::string::npos);
  const std::string text = propagation_text(ffn(), p);
  CHECK(text.find("h[B_X, S, H_Y]") != std::string::npos);

  // Rule 7: g [8, 4, 64] lies as X,_,Y, a 4x4x16 block of 256 elements. The softmax needs h whole:
  // gathering it over Y sends 3 x 256 elements, moving Y onto b (4 rows here, 1 per device of Y)
  // by AllToAll 3/4 x 256, so p lies as (X,Y),_,_. The sum over h leaves partial sums over Y:
  // an AllReduce sends 2 x 3/4 of the 4x4 block, a ReduceScatter onto b 3/4 of it, so r lies as
  // (X,Y),_. Everything else keeps the rules' spec.
  const Propagation searched = propagate(ffn(), kMesh, {{"x", "X,_,Y"}, {"W_in", "X,Y"}, {"W_out", "Y,X"}}, {}, true);
  CHECK(searched.specs.at("p").spec.text() == "(X,Y),_,_");
  CHECK(searched.specs.at("p").origin.find("with the rules' X,_,_ (") != std::string::npos);
  CHECK(searched.specs.at("r").spec.text() == "(X,Y),_");
  for (const char* t : {"h", "hb", "g", "y", "bias"}) {
    CAPTURE(t);
    CHECK(searched.specs.at(t).spec == p.specs.at(t).spec);
  }
}

TEST_CASE("propagate: conflicts drop an axis and say so; nothing known means replicated") {
  // W_in's m on Y clashes with nothing; x's m on X and b on X would use X twice in h? No: h has no
  // m. Here h's b takes X from x and h's h would take X from W_in: the second X is dropped.
  const Propagation p = propagate(ffn(), kMesh, {{"x", "X,_,_"}, {"W_in", "_,X"}}, {}, false);  // the rules alone
  CHECK(p.specs.at("h").spec.text() == "X,_,_");
  CHECK(p.specs.at("h").origin.find("dropped X") != std::string::npos);
  // W_out: nothing annotates it; it takes h from g back through op 4; m from nothing.
  CHECK(p.specs.at("W_out").origin.find("back through op 4") != std::string::npos);
  const Propagation none = propagate(ffn(), kMesh, {});
  CHECK(none.annotated == 0);
  CHECK(none.specs.at("x").spec.text() == "_,_,_");
  CHECK(none.specs.at("x").origin == "replicated: nothing constrains it");
}

TEST_CASE("propagate: annotations that do not fit are refused naming the tensor") {
  for (const auto& [tensor, spec] : std::vector<std::pair<std::string, std::string>>{
           {"x", "X,_"}, {"x", "Q,_,_"}, {"x", "X,X,_"}, {"W_in", "_,_{X}"}, {"x", "_,(X,Y),_"}, {"nope", "X"}}) {
    CAPTURE(tensor);
    CAPTURE(spec);
    try {
      propagate(ffn(), kMesh, {{tensor, spec}});
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find(tensor) != std::string::npos);
    }
  }
}

TEST_CASE("propagate: an elementwise op follows its more split operand, whatever the order of declaration") {
  // c = a + b with a replicated and b split over X: c split like b, so a is sliced for free and
  // nothing moves. Before, c followed whichever input was declared first, and a-first all-gathered b.
  for (const bool a_first : {true, false}) {
    CAPTURE(a_first);
    const std::string inputs = a_first ? R"(inputs = { a = "ij", b = "ij" })" : R"(inputs = { b = "ij", a = "ij" })";
    const std::string text = R"(name = "add"
mesh = "X=4"
dims = { i = 8, j = 6 }
)" + inputs + R"(
ops = [ { out = "c", op = "add", in = ["a", "b"] } ]
outputs = ["c"]
shard = { a = "_,_", b = "X,_" }
)";
    const CaseFile c = parse_case_file(text, "add.toml");
    const Mesh mesh = Mesh::parse("X=4");
    const Propagation p = propagate(c.program, mesh, c.shard);
    CHECK(p.specs.at("c").spec.text() == "X,_");
    CHECK(p.specs.at("c").origin == "like b (same dims ij)");
    CHECK(plan_case(c, mesh).predicted_bytes_per_device() == 0);
  }
}

TEST_CASE("propagate: a partial gradient is reduce-scattered into the split its consumer wants") {
  // Sequence-parallel MLP with its residual on Y=4: x and out split over s, the weights Megatron's,
  // and hid annotated as Megatron's column-parallel layer leaves it (split over h). Unannotated,
  // hid would keep x's split over s (its natural layout: x's s and W_in's h both sit on Y, and the
  // first operand keeps its split, article 001's rule). dx_2 is a helper of the backward, free to
  // lie where the backward sends least.
  // In the backward dx = dout + dx_2, dout and dx split over s; dx_2 = dhid W_in^T is a partial
  // sum over Y. Completing it into dx's split is one ReduceScatter of dx_2[2,8,16] (1024 B):
  // (4-1)/4 x 1024 = 768 B, where an AllReduce and a slice send 2 x 768 = 1536 B. By hand, the
  // whole run: all_gather x 768 (forward), reduce_scatter y 768, all_gather dout 768,
  // reduce_scatter dx_2 768, all_gather x again for dW_in 768: 3840 B (Megatron's).
  const std::string text = R"(name = "sp_mlp"
mesh = "Y=4"
dims = { b = 2, s = 8, m = 16, h = 32 }
inputs = { x = "bsm", W_in = "mh", W_out = "hm" }
shard = { x = "_,Y,_", W_in = "_,Y", W_out = "Y,_", out = "_,Y,_", hid = "_,_,Y" }
ops = [
  { out = "hid", op = "einsum", eq = "bsm,mh->bsh", in = ["x", "W_in"] },
  { out = "g", op = "gelu", in = ["hid"] },
  { out = "y", op = "einsum", eq = "bsh,hm->bsm", in = ["g", "W_out"] },
  { out = "out", op = "add", in = ["x", "y"] },
]
outputs = ["out"]
backward = true
)";
  const CaseFile c = parse_case_file(text, "sp_mlp.toml");
  const ProgramPlan plan = plan_case(c, Mesh::parse(c.mesh));
  CHECK(plan.propagation.specs.at("dx_2").spec.text() == "_,Y,_");
  CHECK(join(plan.collective_lines(), "; ") ==
        "all_gather x over Y; reduce_scatter y over Y; all_gather dout over Y; reduce_scatter dx_2 over Y; "
        "all_gather x over Y");
  std::vector<std::size_t> bytes;
  for (const auto* s : plan.collectives()) bytes.push_back(s->predicted_bytes);
  CHECK(bytes == std::vector<std::size_t>{768, 768, 768, 768, 768});
  CHECK(plan.predicted_bytes_per_device() == 3840);
}
