#include "core/spec.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/text.hpp"

namespace shardlab {

namespace {

std::vector<std::string> parse_axis_list(const std::string& entry, const std::string& whole) {
  std::string e = trim(entry);
  if (e == "_" ) return {};
  bool paren = e.size() >= 2 && e.front() == '(' && e.back() == ')';
  if (paren) e = e.substr(1, e.size() - 2);
  std::vector<std::string> axes;
  for (const auto& part : split(e, ',')) {
    std::string a = trim(part);
    if (!is_identifier(a))
      throw Error(ErrorKind::parse, "spec '" + whole + "' has entry '" + trim(entry) +
                                        "'; expected _ (replicated), a mesh axis name, or (X,Y)");
    axes.push_back(a);
  }
  return axes;
}

// Single-letter axes print run together as in the scaling book (I_{XY}); longer names get commas.
bool short_names(const std::vector<std::string>& axes) {
  for (const auto& a : axes)
    if (a.size() != 1) return false;
  return true;
}

}  // namespace

Spec Spec::parse(const std::string& raw) {
  std::string text = trim(raw);
  Spec spec;
  auto brace = text.find('{');
  if (brace != std::string::npos) {
    if (text.back() != '}')
      throw Error(ErrorKind::parse, "spec '" + raw + "' has an unclosed '{'; partial sums are written like _,_{Y}");
    std::string inner = trim(text.substr(brace + 1, text.size() - brace - 2));
    text = trim(text.substr(0, brace));
    if (inner.rfind("U_", 0) == 0) inner = inner.substr(2);
    spec.partial = parse_axis_list(inner, raw);
    if (spec.partial.empty()) throw Error(ErrorKind::parse, "spec '" + raw + "' has empty partial-sum braces");
  }
  if (text.empty()) return spec;  // a scalar
  int depth = 0;
  for (char c : text) {
    depth += (c == '(') - (c == ')');
    if (depth < 0 || depth > 1) throw Error(ErrorKind::parse, "spec '" + raw + "' has unbalanced parentheses");
  }
  if (depth != 0) throw Error(ErrorKind::parse, "spec '" + raw + "' has unbalanced parentheses");
  for (const auto& entry : split_top(text, ',')) spec.dims.push_back(parse_axis_list(entry, raw));
  return spec;
}

Spec Spec::replicated(std::size_t rank) {
  Spec s;
  s.dims.resize(rank);
  return s;
}

std::vector<std::string> Spec::used_axes() const {
  std::vector<std::string> out;
  for (const auto& d : dims) out.insert(out.end(), d.begin(), d.end());
  out.insert(out.end(), partial.begin(), partial.end());
  return out;
}

int Spec::shards(const Mesh& mesh, std::size_t dim) const { return mesh.axes_size(dims.at(dim)); }

std::string Spec::text() const {
  std::vector<std::string> parts;
  for (const auto& d : dims) {
    if (d.empty()) parts.push_back("_");
    else if (d.size() == 1) parts.push_back(d[0]);
    else parts.push_back("(" + join(d, ",") + ")");
  }
  std::string out = join(parts, ",");
  if (!partial.empty()) out += "{" + join(partial, ",") + "}";
  return out;
}

std::string Spec::notation(const std::string& tensor, const std::vector<std::string>& dim_names) const {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    std::string name = i < dim_names.size() ? dim_names[i] : std::string(1, static_cast<char>('I' + (i % 18)));
    if (dims[i].size() == 1) name += "_" + dims[i][0];
    if (dims[i].size() > 1) name += "_{" + join(dims[i], short_names(dims[i]) ? "" : ",") + "}";
    parts.push_back(name);
  }
  std::string out = tensor + "[" + join(parts, ", ") + "]";
  if (!partial.empty()) out += "{U_" + join(partial, short_names(partial) ? "" : ",") + "}";
  return out;
}

void Spec::validate_axes(const Mesh& mesh, const std::string& tensor) const {
  std::vector<std::string> seen;
  for (const auto& a : used_axes()) {
    if (!mesh.has_axis(a))
      throw Error(ErrorKind::unknown_axis, "spec " + text() + " of " + tensor + " names mesh axis " + a +
                                               ", but mesh " + mesh.text() + " has no such axis");
    if (std::find(seen.begin(), seen.end(), a) != seen.end())
      throw Error(ErrorKind::duplicate_axis, "spec " + text() + " of " + tensor + " uses mesh axis " + a +
                                                 " twice; each mesh axis may shard at most one dim");
    seen.push_back(a);
  }
}

void Spec::validate(const Mesh& mesh, const Shape& shape, const std::string& tensor) const {
  if (dims.size() != shape.size())
    throw Error(ErrorKind::rank_mismatch, "spec " + text() + " has " + std::to_string(dims.size()) + " entries but " +
                                              tensor + " " + shape_text(shape) + " has rank " + std::to_string(shape.size()));
  validate_axes(mesh, tensor);
  if (mesh.uneven() != Uneven::none) return;  // any size splits (core/layout.hpp says how)
  for (std::size_t i = 0; i < dims.size(); ++i) {
    int n = shards(mesh, i);
    if (shape[i] % static_cast<std::size_t>(n) != 0) {
      std::string axes = dims[i].size() == 1 ? "mesh axis " + dims[i][0] : "mesh axes (" + join(dims[i], ",") + ")";
      throw Error(ErrorKind::not_divisible, "dim " + std::to_string(i) + " of " + tensor + " (size " +
                                                std::to_string(shape[i]) + ") is not divisible by " + axes +
                                                " (size " + std::to_string(n) + ")");
    }
  }
}

}  // namespace shardlab
