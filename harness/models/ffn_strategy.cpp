// The FFN strategies as data (each tensor's spec, with placeholder axes), the dims, and a
// strategy's specs on a given mesh (harness/models/ffn.hpp).
#include <map>

#include "core/error.hpp"
#include "core/text.hpp"
#include "harness/models/ffn.hpp"

namespace shardlab {

// Placeholder axes: X, Y on two-axis meshes; Y the only axis of one-axis meshes; D every axis.
// x_in / g_in left empty: the tensor is used as held.
const std::vector<FfnStrategy>& ffn_strategies() {
  static const std::vector<FfnStrategy> all = {
      {"gspmd", "2D layout: batch over X, embed and hidden over Y, both weights over X and Y", "articles 001, 002",
       2, "batch->X,hidden->Y,heads->Y,embed_kernel->X,embed->Y", "", "", "", "", "", "", ""},
      {"column", "both matmuls column-wise: weights split by columns, each output gathered", "article 003", 1, "",
       "_,_,_", "", "_,Y", "_,_,_", "", "_,Y", "_,_,_"},
      {"row", "both matmuls row-wise: inputs sliced by columns, weights by rows, each output all-reduced",
       "article 003", 1, "", "_,_,_", "_,_,Y", "Y,_", "_,_,_", "_,_,Y", "Y,_", "_,_,_"},
      {"pairwise", "Megatron: W_in by columns, W_out by rows; hidden stays split, one AllReduce", "article 003", 1,
       "", "_,_,_", "", "_,Y", "_,_,Y", "", "Y,_", "_,_,_"},
      {"row_column", "W_in by rows (AllReduce, GELU on the full sum), then W_out by columns (AllGather)",
       "article 003", 1, "", "_,_,_", "_,_,Y", "Y,_", "_,_,_", "", "_,Y", "_,_,_"},
      {"data", "data parallel: batch split over every mesh axis, weights replicated", "article 003", 0, "", "D,_,_", "",
       "_,_", "D,_,_", "", "_,_", "D,_,_"},
  };
  return all;
}

std::string ffn_default_mesh(const FfnStrategy& s, int line) {
  if (s.mesh_axes == 2) return "X=2,Y=4";
  return (s.mesh_axes == 1 ? "Y=" : "X=") + std::to_string(line);
}

std::string ffn_strategy_names() {
  std::vector<std::string> names;
  for (const auto& s : ffn_strategies()) names.push_back(s.name);
  return join(names, "|");
}

const FfnStrategy& ffn_strategy(const std::string& name) {
  for (const auto& s : ffn_strategies())
    if (s.name == name) return s;
  throw Error(ErrorKind::parse, "strategy '" + name + "' is not known; choose one of " + ffn_strategy_names());
}

std::vector<FfnLogical> ffn_logical_names() {
  return {{"x", {"batch", "seq", "embed"}},
          {"W_in", {"embed_kernel", "hidden"}},
          {"h", {"batch", "seq", "hidden"}},
          {"W_out", {"hidden", "embed_kernel"}},
          {"y", {"batch", "seq", "embed"}}};
}

FfnDims article_ffn_dims() { return {8, 512, 5120, 20480}; }

FfnDims parse_ffn_dims(const std::string& text) {
  if (trim(text) == "article") return article_ffn_dims();
  std::string lower;
  for (char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  FfnDims d;
  for (const auto& [letter, size] : parse_dim_sizes(lower)) {
    switch (letter) {
      case 'b': d.b = size; break;
      case 's': d.s = size; break;
      case 'm': d.m = size; break;
      case 'h': d.h = size; break;
      default:
        throw Error(ErrorKind::parse, std::string("--dims has letter ") +
                                          static_cast<char>(std::toupper(static_cast<unsigned char>(letter))) +
                                          "; the FFN's dims are B (batch), S (sequence), M (embed), H (hidden)");
    }
  }
  return d;
}

std::string ffn_dims_text(const FfnDims& d) {
  return "B=" + std::to_string(d.b) + ",S=" + std::to_string(d.s) + ",M=" + std::to_string(d.m) +
         ",H=" + std::to_string(d.h);
}

std::string phase_name(FfnPhase p) { return p == FfnPhase::forward ? "forward" : "backward"; }

namespace {

using Axes = std::vector<std::string>;

// The placeholder axes of a strategy, each mapped to the mesh axes it stands for.
std::map<std::string, Axes> placeholders(const FfnStrategy& s, const Mesh& mesh) {
  const auto& n = mesh.names();
  if (s.mesh_axes == 2) return {{"X", {n[0]}}, {"Y", {n[1]}}};
  if (s.mesh_axes == 1) return {{"Y", {n[0]}}};
  return {{"D", n}};
}

void check_mesh_rank(const FfnStrategy& s, const Mesh& mesh) {
  if (s.mesh_axes == 0 || mesh.rank() == s.mesh_axes) return;
  const std::string want = s.mesh_axes == 1 ? "a one-axis mesh such as Y=4" : "a two-axis mesh such as X=2,Y=4";
  throw Error(ErrorKind::parse, "strategy " + s.name + " runs on " + want + "; mesh " + mesh.text() + " has " +
                                    std::to_string(mesh.rank()) + (mesh.rank() == 1 ? " axis" : " axes"));
}

Spec on_mesh(const std::string& text, const std::map<std::string, Axes>& axes) {
  Spec spec = Spec::parse(text);
  for (auto& dim : spec.dims) {
    Axes renamed;
    for (const auto& a : dim) {
      auto it = axes.find(a);
      if (it == axes.end()) renamed.push_back(a);
      else renamed.insert(renamed.end(), it->second.begin(), it->second.end());
    }
    dim = renamed;
  }
  return spec;
}

}  // namespace

Shape ffn_x_shape(const FfnDims& d) { return {d.b, d.s, d.m}; }
Shape ffn_h_shape(const FfnDims& d) { return {d.b, d.s, d.h}; }

AxisMapping ffn_rules(const FfnStrategy& s, const Mesh& mesh) {
  if (s.rules.empty()) return {};
  check_mesh_rank(s, mesh);
  const auto axes = placeholders(s, mesh);
  AxisMapping m = parse_mapping(s.rules);
  for (auto& [logical, axis] : m) axis = axes.at(axis).front();
  return m;
}

FfnSpecs ffn_specs(const FfnStrategy& s, const Mesh& mesh, const FfnDims& d) {
  check_mesh_rank(s, mesh);
  FfnSpecs f;
  const Shape sx = ffn_x_shape(d), sh = ffn_h_shape(d), win{d.m, d.h}, wout{d.h, d.m};
  if (!s.rules.empty()) {
    const AxisMapping rules = ffn_rules(s, mesh);
    const auto names = ffn_logical_names();
    f.x = spec_from_mapping(names[0].dims, rules, mesh, "x", sx);
    f.w_in = spec_from_mapping(names[1].dims, rules, mesh, "W_in", win);
    f.h = spec_from_mapping(names[2].dims, rules, mesh, "h", sh);
    f.w_out = spec_from_mapping(names[3].dims, rules, mesh, "W_out", wout);
    f.y = spec_from_mapping(names[4].dims, rules, mesh, "y", sx);
    f.x_in = f.x;
    f.g_in = f.h;
  } else {
    const auto axes = placeholders(s, mesh);
    f.x = on_mesh(s.x, axes);
    f.x_in = s.x_in.empty() ? f.x : on_mesh(s.x_in, axes);
    f.w_in = on_mesh(s.w_in, axes);
    f.h = on_mesh(s.h, axes);
    f.g_in = s.g_in.empty() ? f.h : on_mesh(s.g_in, axes);
    f.w_out = on_mesh(s.w_out, axes);
    f.y = on_mesh(s.y, axes);
  }
  f.x.validate(mesh, sx, "x");
  f.x_in.validate(mesh, sx, "x");
  f.w_in.validate(mesh, win, "W_in");
  f.h.validate(mesh, sh, "h");
  f.g_in.validate(mesh, sh, "g");
  f.w_out.validate(mesh, wout, "W_out");
  f.y.validate(mesh, sx, "y");
  return f;
}

}  // namespace shardlab
