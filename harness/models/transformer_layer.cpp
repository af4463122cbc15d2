#include "harness/models/transformer_layer.hpp"

namespace shardlab {

namespace {

// Layer norm k of `in` into `out`: mean and variance over the embed dim m, then gain g and bias c.
std::string layer_norm(const std::string& k, const std::string& in, const std::string& out, const std::string& part) {
  auto op = [&](const std::string& o, const std::string& name, const std::string& args, const std::string& more = "") {
    return "  { out = \"" + o + "\", op = \"" + name + "\", in = [" + args + "]" + more + ", part = \"" + part + "\" },\n";
  };
  return op("mu" + k, "mean", "\"" + in + "\"", ", over = \"m\"") + op("xc" + k, "sub", "\"" + in + "\", \"mu" + k + "\"") +
         op("sq" + k, "square", "\"xc" + k + "\"") + op("var" + k, "mean", "\"sq" + k + "\"", ", over = \"m\"") +
         op("ve" + k, "shift", "\"var" + k + "\"", ", value = 1e-5") + op("rs" + k, "rsqrt", "\"ve" + k + "\"") +
         op("xn" + k, "mul", "\"xc" + k + "\", \"rs" + k + "\"") + op("xs" + k, "mul", "\"xn" + k + "\", \"g" + k + "\"") +
         op(out, "add", "\"xs" + k + "\", \"c" + k + "\"");
}

}  // namespace

std::string transformer_layer_text() {
  return "dims = { b = 2, s = 8, t = 8, m = 16, n = 8, d = 4, h = 64 }\nbackward = true\nops = [\n" +
         layer_norm("1", "x", "a", "attention") + R"(  { out = "a_t", op = "rename", in = ["a"], to = "btm", part = "attention" },
  { out = "q", op = "einsum", eq = "bsm,mnd->bsnd", in = ["a", "W_q"], part = "attention" },
  { out = "k", op = "einsum", eq = "btm,mnd->btnd", in = ["a_t", "W_k"], part = "attention" },
  { out = "v", op = "einsum", eq = "btm,mnd->btnd", in = ["a_t", "W_v"], part = "attention" },
  { out = "scores", op = "einsum", eq = "bsnd,btnd->bnst", in = ["q", "k"], part = "attention" },
  { out = "scaled", op = "scale", in = ["scores"], value = 0.5, part = "attention" },
  { out = "p", op = "softmax", in = ["scaled"], over = "t", part = "attention" },
  { out = "o", op = "einsum", eq = "bnst,btnd->bsnd", in = ["p", "v"], part = "attention" },
  { out = "att", op = "einsum", eq = "bsnd,ndm->bsm", in = ["o", "W_o"], part = "attention" },
  { out = "r1", op = "add", in = ["x", "att"], part = "attention" },
)" + layer_norm("2", "r1", "f", "ffn") +
         R"(  { out = "h", op = "einsum", eq = "bsm,mh->bsh", in = ["f", "W_in"], part = "ffn" },
  { out = "g", op = "gelu", in = ["h"], part = "ffn" },
  { out = "ff", op = "einsum", eq = "bsh,hm->bsm", in = ["g", "W_out"], part = "ffn" },
  { out = "y", op = "add", in = ["r1", "ff"], part = "ffn" },
]
outputs = ["y"]
[inputs]
x = "bsm"
g1 = "m"
c1 = "m"
W_q = "mnd"
W_k = "mnd"
W_v = "mnd"
W_o = "ndm"
g2 = "m"
c2 = "m"
W_in = "mh"
W_out = "hm"
)";
}

}  // namespace shardlab
