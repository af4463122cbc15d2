#include "harness/models/moe_io.hpp"

#include "core/error.hpp"
#include "core/layout.hpp"
#include "harness/models/case_run_io.hpp"

namespace shardlab {

namespace {

Shape array_shape(const NamedArrays& files, const std::string& name, std::size_t rank) {
  const auto it = files.arrays.find(name);
  if (it == files.arrays.end())
    throw Error(ErrorKind::io, files.source + " holds no array " + name + "; shardlab moe --inputs needs x [T, m], "
                               "W_router [m, E], W_in [E, m, h] and W_out [E, h, m] (dy [T, m] if given)");
  const Shape shape = shape_of(it->second.data);
  if (shape.size() != rank)
    throw Error(ErrorKind::rank_mismatch, files.where(name) + " has " + std::to_string(shape.size()) +
                                              " dims; " + name + " here has " + std::to_string(rank));
  return shape;
}

// Dim `d` of array `name` must be `want`, dim `what` of `of`.
void same(const NamedArrays& files, const std::string& name, std::size_t d, std::size_t want, const std::string& of,
          const std::string& what) {
  const std::size_t got = files.arrays.at(name).data.shape()[d];
  if (got != want)
    throw Error(ErrorKind::rank_mismatch, files.where(name) + " has " + std::to_string(got) + " in dim " +
                                              std::to_string(d) + ", where " + of + " gives " + what + " = " +
                                              std::to_string(want));
}

}  // namespace

MoeShape moe_shape_of(const NamedArrays& files, MoeShape s) {
  const Shape x = array_shape(files, "x", 2), router = array_shape(files, "W_router", 2);
  const Shape w_in = array_shape(files, "W_in", 3);
  array_shape(files, "W_out", 3);
  s.tokens = x[0];
  s.model = x[1];
  s.experts = static_cast<int>(std::min<std::size_t>(router[1], 1u << 30));
  s.hidden = w_in[2];
  same(files, "W_router", 0, s.model, "x", "m");
  same(files, "W_in", 0, router[1], "W_router", "E");
  same(files, "W_in", 1, s.model, "x", "m");
  same(files, "W_out", 0, router[1], "W_router", "E");
  same(files, "W_out", 1, s.hidden, "W_in", "h");
  same(files, "W_out", 2, s.model, "x", "m");
  return s;
}

std::string read_moe_inputs(const std::string& path, MoeInputs& in, DType t) {
  return read_named_inputs(path, {{"x", &in.x}, {"W_router", &in.w_router}, {"W_in", &in.w_in},
                                  {"W_out", &in.w_out}, {"dy", &in.dout}}, t);
}

std::vector<std::pair<std::string, Tensor>> moe_saved_arrays(const Mesh& mesh, const RunResult& run,
                                                             const MoeInputs& in, const MoeShape& s) {
  const std::string ep = mesh.names().back();
  Spec by_token, replicated = Spec::replicated(2), by_expert = Spec::replicated(3);
  by_token.dims = {mesh.names(), {}};
  by_expert.dims[0] = {ep};
  const std::size_t T = s.tokens, E = static_cast<std::size_t>(s.experts), K = static_cast<std::size_t>(s.top_k);
  const std::size_t G = static_cast<std::size_t>(mesh.devices());
  const std::vector<std::pair<std::string, std::pair<Spec, Shape>>> taken = {
      {"out", {by_token, {T, s.model}}},          {"dx", {by_token, {T, s.model}}},
      {"dW_router", {replicated, {s.model, E}}},  {"dW_in", {by_expert, {E, s.model, s.hidden}}},
      {"dW_out", {by_expert, {E, s.hidden, s.model}}}, {"logits", {by_token, {T, E}}},
      {"experts", {by_token, {T, K}}},            {"gates", {by_token, {T, K}}},
      {"slot", {by_token, {T, K}}},               {"kept", {by_token, {G, E}}},
      {"routed", {by_token, {G, E}}}};
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, layout] : taken) {
    std::vector<Tensor> blocks;
    for (const auto& device : run.outputs) blocks.push_back(device.at(name));
    out.push_back({name, assemble(mesh, layout.first, layout.second, blocks, name).tensor});
  }
  out.push_back({"capacity", Tensor(xt::xarray<double>({double(moe_capacity(s, T / G))}))});
  out.push_back({"dy", in.dout});
  return out;
}

}  // namespace shardlab
