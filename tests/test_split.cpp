// core/split.cpp and the program ops split and concat (harness/plan/program.cpp, program_plan.cpp,
// gradient.cpp): split and concat against index loops written here; Megatron's fused QKV
// (harness/cases/attention_fused_qkv.toml: one matmul, then split into q, k, v) gives the unfused
// attention_megatron.toml's outputs and gradients (W_qkv built from W_q, W_k, W_v by hand), its
// collectives and bytes, and verifies on the sim mesh; split's gradient is one concat, a part no
// op uses filled with zeros (central differences agree); bad splits are refused naming the op.
#include <doctest/doctest.h>

#include <string>

#include "core/error.hpp"
#include "core/split.hpp"
#include "harness/check/case_file.hpp"
#include "harness/check/gradient_check.hpp"
#include "harness/models/case_run.hpp"
#include "harness/plan/gradient.hpp"
#include "tests/run_program.hpp"

using namespace shardlab;

namespace {

Tensor counting(const Shape& s) {
  Tensor x = xt::empty<double>(s);
  for (std::size_t k = 0; k < x.size(); ++k) x.data()[k] = double(k);
  return x;
}

double largest_difference(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double d = 0;
  for (std::size_t k = 0; k < a.size(); ++k) d = std::max(d, std::abs(a.data()[k] - b.data()[k]));
  return d;
}

}  // namespace

TEST_SUITE("split") {

TEST_CASE("split takes one part of a dim, concat stacks parts along a new dim, by index loops") {
  const Tensor x = counting({2, 3, 4});
  for (std::size_t part = 0; part < 3; ++part) {
    const Tensor y = split_op(x, 1, part);
    REQUIRE(y.shape() == (std::vector<std::size_t>{2, 4}));
    for (std::size_t a = 0; a < 2; ++a)
      for (std::size_t c = 0; c < 4; ++c) CHECK(y(a, c) == x(a, part, c));
  }
  const Tensor first = split_op(x, 0, 1);
  for (std::size_t b = 0; b < 3; ++b)
    for (std::size_t c = 0; c < 4; ++c) CHECK(first(b, c) == x(1, b, c));
  const Tensor last = split_op(x, 2, 3);
  for (std::size_t a = 0; a < 2; ++a)
    for (std::size_t b = 0; b < 3; ++b) CHECK(last(a, b) == x(a, b, 3));
  const Tensor p = counting({2, 4}), q = counting({2, 4}) + 100.0;
  const Tensor z = concat_op({p, q}, 1);
  REQUIRE(z.shape() == (std::vector<std::size_t>{2, 2, 4}));
  for (std::size_t a = 0; a < 2; ++a)
    for (std::size_t c = 0; c < 4; ++c) {
      CHECK(z(a, 0, c) == p(a, c));
      CHECK(z(a, 1, c) == q(a, c));
    }
  CHECK(concat_op({split_op(x, 1, 0), split_op(x, 1, 1), split_op(x, 1, 2)}, 1) == x);
  CHECK_THROWS_AS(split_op(x, 1, 3), Error);
  CHECK_THROWS_AS(concat_op({p, counting({4, 2})}, 0), Error);
}

TEST_CASE("fused QKV: the unfused attention's outputs and gradients, with W_qkv stacked by hand") {
  const CaseFile fused = read_case_file("harness/cases/attention_fused_qkv.toml");
  const CaseFile unfused = read_case_file("harness/cases/attention_megatron.toml");
  const GradientProgram gf = gradient_program(fused.program), gu = gradient_program(unfused.program);
  std::map<std::string, Tensor> in_u = program_inputs(gu.program, 7), in_f;
  // W_qkv[m, n, j, d] = W_q, W_k, W_v at j = 0, 1, 2.
  const char* parts[3] = {"W_q", "W_k", "W_v"};
  Tensor w = xt::empty<double>(Shape{16, 4, 3, 4});
  for (std::size_t m = 0; m < 16; ++m)
    for (std::size_t n = 0; n < 4; ++n)
      for (std::size_t j = 0; j < 3; ++j)
        for (std::size_t d = 0; d < 4; ++d) w(m, n, j, d) = in_u.at(parts[j])(m, n, d);
  in_f["x"] = in_u.at("x");
  in_f["W_qkv"] = w;
  in_f["W_o"] = in_u.at("W_o");
  in_f["dy"] = in_u.at("dy");
  const ProgramReference ru = run_reference(gu.program, in_u, DType::float64, 1);
  const ProgramReference rf = run_reference(gf.program, in_f, DType::float64, 1);
  for (const char* t : {"y", "dx", "dW_o"}) {
    CAPTURE(t);
    CHECK(largest_difference(rf.values.at(t), ru.values.at(t)) <= 1e-12);
  }
  for (std::size_t j = 0; j < 3; ++j) {
    CAPTURE(parts[j]);
    CHECK(largest_difference(split_op(rf.values.at("dW_qkv"), 2, j), ru.values.at(std::string("d") + parts[j])) <= 1e-12);
  }
}

TEST_CASE("fused QKV on Y=4: the unfused case's collectives and bytes, verified in 3 dtypes") {
  const CaseFile fused = read_case_file("harness/cases/attention_fused_qkv.toml");
  const CaseFile unfused = read_case_file("harness/cases/attention_megatron.toml");
  const Mesh mesh = Mesh::parse("Y=4");
  const ProgramPlan pf = plan_case(fused, mesh), pu = plan_case(unfused, mesh);
  CHECK(pf.collective_lines() == pu.collective_lines());
  CHECK(pf.collective_lines() == std::vector<std::string>{"all_reduce y over Y", "all_reduce dx over Y"});
  // Each all_reduce moves b*s*m = 128 float32 elements, 2(n-1)/n of 512 B = 768 B on 4 devices.
  CHECK(pf.predicted_bytes_per_device() == 2 * 768);
  CHECK(pf.predicted_bytes_per_device() == pu.predicted_bytes_per_device());
  // split's gradient is one concat of dq, dk_s and dv_s along j.
  int concats = 0;
  for (const auto& op : pf.program.ops)
    if (op.name == "concat") {
      ++concats;
      CHECK(op.out == "dqkv");
      CHECK(op.over == "j");
      CHECK(op.in == std::vector<std::string>{"dq", "dk_s", "dv_s"});
    }
  CHECK(concats == 1);
  for (DType t : {DType::float32, DType::float64, DType::bfloat16}) {
    CAPTURE(dtype_name(t));
    const ProgramPlan plan = plan_tensor_program(pf.program, mesh, pf.propagation, t, false, pf.backward_from);
    testing::run_program_checked(plan, t);
  }
}

TEST_CASE("split's gradient: parts no op uses are zeros; central differences agree") {
  const std::string body = R"(name = "t"
mesh = "X=2"
dims = { a = 4, j = 3, c = 2, e = 4 }
inputs = { x = "ajc", W = "ce" }
ops = [
  { out = "p0", op = "split", in = ["x"], over = "j", value = 0 },
  { out = "p2", op = "split", in = ["x"], over = "j", value = 2 },
  { out = "s", op = "mul", in = ["p0", "p2"] },
  { out = "y", op = "einsum", eq = "ac,ce->ae", in = ["s", "W"] },
]
outputs = ["y"]
shard = { x = "X,_,_" }
backward = true
)";
  const CaseFile c = parse_case_file(body, "t.toml");
  const GradientProgram g = gradient_program(c.program);
  bool zero = false;
  for (const auto& op : g.program.ops)
    if (op.name == "scale" && op.value == 0) zero = true;
  CHECK(zero);
  for (const Verdict& v : central_difference_checks(c.program, g, 5)) {
    CAPTURE(v.line());
    CHECK(v.pass);
  }
  const ProgramPlan plan = plan_case(c, Mesh::parse("X=2"));  // float32, the case's default
  testing::run_program_checked(plan, DType::float32);
}

TEST_CASE("split and concat: a part past the dim, a dim the input lacks, parts of other dims: refused") {
  auto program = [](const std::string& op) {
    return "name = \"t\"\nmesh = \"X=2\"\ndims = { a = 4, j = 3, c = 2 }\ninputs = { x = \"ajc\", u = \"ac\" }\n"
           "ops = [ " + op + " ]\noutputs = [\"y\"]\n";
  };
  for (const std::string& bad :
       {std::string("{ out = \"y\", op = \"split\", in = [\"x\"], over = \"j\", value = 3 }"),
        std::string("{ out = \"y\", op = \"split\", in = [\"x\"], over = \"j\", value = 0.5 }"),
        std::string("{ out = \"y\", op = \"split\", in = [\"x\"], over = \"j\" }"),
        std::string("{ out = \"y\", op = \"split\", in = [\"u\"], over = \"j\", value = 0 }"),
        std::string("{ out = \"y\", op = \"concat\", in = [\"u\", \"u\"], over = \"j\", to = \"ajc\" }"),
        std::string("{ out = \"y\", op = \"concat\", in = [\"u\", \"u\", \"x\"], over = \"j\", to = \"ajc\" }"),
        std::string("{ out = \"y\", op = \"concat\", in = [\"u\", \"u\", \"u\"], over = \"j\", to = \"ac\" }")}) {
    CAPTURE(bad);
    try {
      parse_case_file(program(bad), "t.toml");
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("op 1 (y = ") != std::string::npos);
    }
  }
  const CaseFile ok =
      parse_case_file(program("{ out = \"y\", op = \"concat\", in = [\"u\", \"u\", \"u\"], over = \"j\", to = \"ajc\" }"),
                      "t.toml");
  CHECK(ok.program.dims.at("y") == "ajc");
}

}  // TEST_SUITE
