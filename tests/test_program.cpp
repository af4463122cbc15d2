// harness/plan/program.cpp: every tensor's dims derived by the rules of each op kind, and every
// malformed program refused with a sentence naming the op, the tensor and the dim.
#include <doctest/doctest.h>

#include <string>

#include "core/error.hpp"
#include "harness/plan/program.hpp"

using namespace shardlab;

namespace {

TensorProgram base() {
  TensorProgram p;
  p.name = "t";
  p.sizes = {{'b', 2}, {'s', 3}, {'m', 4}, {'h', 8}};
  p.inputs = {{"x", "bsm"}, {"W", "mh"}, {"bias", "h"}};
  return p;
}

ProgramOp op(const std::string& out, const std::string& name, std::vector<std::string> in, const std::string& eq = "",
             const std::string& over = "") {
  ProgramOp o;
  o.out = out;
  o.name = name;
  o.in = std::move(in);
  o.eq = eq;
  o.over = over;
  return o;
}

// The message make_program throws for p, or "" when it takes it.
std::string refusal(TensorProgram p) {
  try {
    make_program(std::move(p));
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::parse);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("program: each op kind derives its output's dims") {
  TensorProgram p = base();
  p.ops = {op("h", "einsum", {"x", "W"}, "bsm,mh->bsh"), op("hb", "add", {"bias", "h"}), op("g", "gelu", {"hb"}),
           op("r", "sum", {"g"}, "", "hs"),               op("mx", "max", {"g"}, "", "h"), op("p", "softmax", {"g"}, "", "h")};
  p.outputs = {"r", "p"};
  const TensorProgram q = make_program(p);
  CHECK(q.dims.at("h") == "bsh");
  CHECK(q.dims.at("hb") == "bsh");  // the bias h broadcasts into bsh, which keeps its order
  CHECK(q.dims.at("g") == "bsh");
  CHECK(q.dims.at("r") == "b");
  CHECK(q.dims.at("mx") == "bs");
  CHECK(q.dims.at("p") == "bsh");
  CHECK(q.shape("h") == Shape{2, 3, 8});
  CHECK(q.tensors() == std::vector<std::string>{"x", "W", "bias", "h", "hb", "g", "r", "mx", "p"});
  CHECK(q.is_input("W"));
  CHECK(!q.is_input("h"));
  CHECK(program_text(q).find("op 2   hb[bsh] = add(bias, h)") != std::string::npos);
}

TEST_CASE("program: malformed programs are refused naming the op, the tensor and the dim") {
  auto with = [](ProgramOp o, std::vector<std::string> outputs = {"y"}) {
    TensorProgram p = base();
    o.line = 7;
    p.ops = {o};
    p.outputs = outputs;
    return p;
  };
  struct Bad {
    TensorProgram p;
    std::vector<std::string> words;
  };
  const Bad bad[] = {
      {with(op("y", "gelo", {"x"})), {"op 1 (y = gelo, line 7)", "'gelo' is not an op", "gelu"}},
      {with(op("y", "gelu", {"x", "W"})), {"takes 1 operand, not 2"}},
      {with(op("y", "einsum", {"x", "W"}, "bsm,hm->bsh")), {"operand W has dims 'mh'", "second operand is 'hm'"}},
      {with(op("y", "einsum", {"x", "W"})), {"needs eq"}},
      {with(op("y", "add", {"x", "q"})), {"reads q, which is not an input"}},
      {with(op("y", "add", {"W", "bias"}), {"y"}), {}},  // h is a subset of mh: fine
      {with(op("y", "add", {"x", "bias"})), {"x 'bsm' and bias 'h' do not broadcast"}},
      {with(op("y", "sum", {"x"})), {"needs over"}},
      {with(op("y", "sum", {"x"}, "", "q")), {"over names dim 'q', which x 'bsm' does not have"}},
      {with(op("y", "softmax", {"x"}, "", "sm")), {"softmax is over one dim"}},
      {with(op("x", "gelu", {"x"})), {"defines x, which is already defined"}},
      {with(op("y", "gelu", {"x"}), {"z"}), {"output z is not"}},
      {with(op("y", "gelu", {"x"}, "bsm->bsm")), {"only einsum takes an eq"}},
      {with(op("y", "broadcast", {"bias"})), {"op 1 (y = broadcast, line 7) needs to"}},
      {with(op("y", "is_max", {"x", "bias"})), {"is_max's second operand must be max(x)"}},
  };
  // broadcast's `to`: only on broadcast, and holding every dim of its input.
  ProgramOp to_on_gelu = op("y", "gelu", {"x"});
  to_on_gelu.to = "bsm";
  CHECK(refusal(with(to_on_gelu)).find("only broadcast, rename and concat take to") != std::string::npos);
  ProgramOp short_to = op("y", "broadcast", {"x"});
  short_to.to = "bs";
  CHECK(refusal(with(short_to)).find("x has dim 'm', which to = 'bs' lacks") != std::string::npos);
  ProgramOp spread = op("y", "broadcast", {"bias"});
  spread.to = "hb";
  CHECK(refusal(with(spread)).empty());
  for (const auto& b : bad) {
    const std::string why = refusal(b.p);
    CAPTURE(why);
    if (b.words.empty()) {
      CHECK(why.empty());
      continue;
    }
    for (const auto& w : b.words) CHECK(why.find(w) != std::string::npos);
  }
  TensorProgram sizes = base();
  sizes.inputs.push_back({"z", "bq"});
  sizes.ops = {op("y", "gelu", {"x"})};
  sizes.outputs = {"y"};
  CHECK(refusal(sizes).find("input z uses dim 'q', which `dims` gives no size") != std::string::npos);
  TensorProgram twice = base();
  twice.inputs.push_back({"z", "bb"});
  twice.outputs = {"x"};
  CHECK(refusal(twice).find("names a dim twice") != std::string::npos);
}

TEST_CASE("make_op: an op written in code takes its kind from its name, as a case file's would") {
  const ProgramOp g = make_op("g", "gelu", {"h"});
  CHECK(g.kind == OpKind::unary);
  CHECK(g.in == std::vector<std::string>{"h"});
  const ProgramOp c = make_op("C", "einsum", {"A", "B"}, "ij,jk->ik");
  CHECK(c.kind == OpKind::einsum);
  CHECK(c.eq == "ij,jk->ik");
  CHECK(make_op("s", "sum", {"x"}).kind == OpKind::reduce);
  CHECK_THROWS_AS(make_op("y", "no_such_op", {"x"}), Error);
}
