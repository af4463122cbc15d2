// harness/check/case_file.cpp: the case-file schema read with toml++, and every malformed file
// refused with one sentence "FILE:LINE: what is wrong".
#include <doctest/doctest.h>

#include <string>

#include "core/error.hpp"
#include "harness/check/case_file.hpp"

using namespace shardlab;

namespace {

const std::string kGspmd = R"(name = "gspmd_ffn"
mesh = "X=2,Y=4"
dtype = "bfloat16"
seed = 3
dims = { b = 8, s = 4, m = 16, h = 64 }
inputs = { x = "bsm", W_in = "mh", W_out = "hm" }
shard = { x = "X,_,Y", W_in = "X,Y", W_out = "Y,X" }
ops = [
  { out = "h", op = "einsum", eq = "bsm,mh->bsh", in = ["x", "W_in"] },
  { out = "g", op = "gelu", in = ["h"] },
  { out = "y", op = "einsum", eq = "bsh,hm->bsm", in = ["g", "W_out"] },
]
outputs = ["y"]
backward = false

[expect]
collectives = ["all_gather x over Y", "all_gather W_in over X"]
max_bytes_per_device = 8192
max_peak_memory_per_device = 65536
)";

std::string refusal(const std::string& text) {
  try {
    parse_case_file(text, "c.toml");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::parse);
    return e.what();
  }
  return "";
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("case file: every field of the schema") {
  const CaseFile c = parse_case_file(kGspmd, "c.toml");
  CHECK(c.program.name == "gspmd_ffn");
  CHECK(c.mesh == "X=2,Y=4");
  CHECK(c.dtype == "bfloat16");
  CHECK(c.seed == 3);
  CHECK(c.program.sizes.at('h') == 64);
  REQUIRE(c.program.inputs.size() == 3);
  CHECK(c.program.inputs[0].first == "x");  // in the file's order, not toml++'s sorted one
  CHECK(c.program.inputs[2].first == "W_out");
  CHECK(c.shard.at("W_out") == "Y,X");
  CHECK(c.shard_line.at("W_out") == 7);
  REQUIRE(c.program.ops.size() == 3);
  CHECK(c.program.ops[1].name == "gelu");
  CHECK(c.program.ops[1].line == 10);
  CHECK(c.program.dims.at("y") == "bsm");
  CHECK(c.program.outputs == std::vector<std::string>{"y"});
  CHECK(!c.backward);
  REQUIRE(c.expect.collectives);
  CHECK(c.expect.collectives->size() == 2);
  CHECK(c.expect.collectives_line == 17);
  CHECK(*c.expect.max_bytes_per_device == 8192);
  CHECK(*c.expect.max_peak_memory_per_device == 65536);
  // Optional fields default.
  const CaseFile d = parse_case_file(replaced(replaced(kGspmd, "dtype = \"bfloat16\"\n", ""), "seed = 3\n", ""), "d.toml");
  CHECK(d.dtype == "float32");
  CHECK(d.seed == 0);
}

TEST_CASE("case file: malformed files name the file, the line and what is wrong") {
  struct Bad {
    std::string text;
    std::vector<std::string> words;
  };
  const Bad bad[] = {
      {replaced(kGspmd, "op = \"gelu\"", "op = \"gelo\""), {"c.toml: op 2 (g = gelo, line 10)", "'gelo' is not an op"}},
      {replaced(kGspmd, "seed = 3", "sead = 3"), {"c.toml:4:", "no key 'sead'"}},
      {replaced(kGspmd, "seed = 3", "seed = \"3\""), {"c.toml:4:", "seed must be an integer"}},
      {replaced(kGspmd, "seed = 3", "seed = -1"), {"c.toml:4:", "at least 0"}},
      {replaced(kGspmd, "mesh = \"X=2,Y=4\"\n", ""), {"c.toml:1:", "needs mesh"}},
      {replaced(kGspmd, "{ out = \"g\", op", "{ out = \"g\", opp = \"x\", op"), {"c.toml:10:", "op 2 has no key 'opp'"}},
      {replaced(kGspmd, "h = 64 }", "h = 64 "), {"c.toml:5:", "not TOML"}},
      {replaced(kGspmd, "W_out = \"Y,X\"", "W_ot = \"Y,X\""), {"c.toml:7:", "shard names W_ot, which is not a tensor"}},
      {replaced(kGspmd, "b = 8,", "B = 8,"), {"c.toml:5:", "dims names 'B'"}},
      {replaced(kGspmd, "max_bytes_per_device", "max_byte_per_device"), {"c.toml:18:", "[expect] has no key"}},
      {replaced(kGspmd, "backward = false", "backward = 0"), {"c.toml:14:", "true or false"}},
      {replaced(kGspmd, "outputs = [\"y\"]", "outputs = [\"z\"]"), {"output z is not"}},
      {replaced(kGspmd, "dtype = \"bfloat16\"", "dtype = \"float16\""), {"c.toml:3:", "'float16' is not one of"}},
      {replaced(kGspmd, "mesh = \"X=2,Y=4\"", "mesh = \"X=0\""), {"c.toml:2:", "mesh axis X"}},
      {replaced(kGspmd, "name = \"gspmd_ffn\"", "name = \"\""), {"c.toml:1:", "give a plain name"}},
      {replaced(kGspmd, "b = 8,", "b = 80000000000,"), {"x[bsm] would hold 5.12e+12 elements", "at most 2^31"}},
  };
  for (const auto& b : bad) {
    const std::string why = refusal(b.text);
    CAPTURE(why);
    CHECK(why.find('\n') == std::string::npos);
    for (const auto& w : b.words) CHECK(why.find(w) != std::string::npos);
  }
  CHECK_THROWS_AS(read_case_file("/nonexistent/case.toml"), Error);
}
