#include "core/named.hpp"

#include <algorithm>

#include <xtensor/xmanipulation.hpp>
#include <xtensor/xreducer.hpp>

#include "core/error.hpp"
#include "core/text.hpp"

namespace shardlab {

AxisMapping parse_mapping(const std::string& raw) {
  std::string text = trim(raw);
  if (text.size() >= 2 && text.front() == '{' && text.back() == '}') text = trim(text.substr(1, text.size() - 2));
  AxisMapping out;
  if (text.empty()) return out;
  for (const auto& part : split(text, ',')) {
    std::string p = trim(part);
    std::size_t at = p.find("->");
    std::size_t skip = 2;
    if (at == std::string::npos) {
      at = p.find(':');
      skip = 1;
    }
    std::string from = at == std::string::npos ? "" : trim(p.substr(0, at));
    std::string to = at == std::string::npos ? "" : trim(p.substr(at + skip));
    for (auto* s : {&from, &to})
      if (s->size() >= 2 && (s->front() == '"' || s->front() == '\'')) *s = s->substr(1, s->size() - 2);
    if (!is_identifier(from) || !is_identifier(to))
      throw Error(ErrorKind::parse, "mapping entry '" + p + "' is not of the form tensor_axis:mesh_axis (or name->axis)");
    for (const auto& e : out)
      if (e.first == from)
        throw Error(ErrorKind::duplicate_axis, "mapping names tensor axis " + from + " twice");
    out.emplace_back(from, to);
  }
  return out;
}

void check_mapping_names(const AxisMapping& mapping, const std::vector<std::string>& dim_names,
                         const std::string& tensor) {
  for (const auto& e : mapping)
    if (std::find(dim_names.begin(), dim_names.end(), e.first) == dim_names.end())
      throw Error(ErrorKind::unknown_axis, "mapping names tensor axis " + e.first + ", but " + tensor +
                                               " has only " + join(dim_names, ", "));
}

std::string mapping_text(const AxisMapping& mapping) {
  std::vector<std::string> parts;
  for (const auto& e : mapping) parts.push_back(e.first + ": " + e.second);
  return "{" + join(parts, ", ") + "}";
}

Spec spec_from_mapping(const std::vector<std::string>& dim_names, const AxisMapping& mapping, const Mesh& mesh,
                       const std::string& tensor, const Shape& shape) {
  Spec spec = Spec::replicated(dim_names.size());
  for (const auto& e : mapping) {
    if (!mesh.has_axis(e.second))
      throw Error(ErrorKind::unknown_axis, "mapping " + e.first + ":" + e.second + " names mesh axis " + e.second +
                                               ", but mesh " + mesh.text() + " has no such axis");
    auto it = std::find(dim_names.begin(), dim_names.end(), e.first);
    if (it != dim_names.end()) spec.dims[it - dim_names.begin()].push_back(e.second);
  }
  if (shape.empty()) spec.validate_axes(mesh, tensor);
  else spec.validate(mesh, shape, tensor);
  return spec;
}

std::size_t NamedTensor::dim(const std::string& name) const {
  auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end())
    throw Error(ErrorKind::rank_mismatch, "named tensor (" + join(names, ", ") + ") has no dim named " + name);
  return static_cast<std::size_t>(it - names.begin());
}

namespace {

// View `t` with dims reordered and padded to `target` names (size 1 where t lacks the name).
Tensor align(const NamedTensor& t, const std::vector<std::string>& target) {
  std::vector<std::size_t> perm;
  for (const auto& n : target)
    if (std::find(t.names.begin(), t.names.end(), n) != t.names.end()) perm.push_back(t.dim(n));
  Tensor moved = xt::transpose(t.data, perm);
  Shape shape;
  for (const auto& n : target) {
    auto it = std::find(t.names.begin(), t.names.end(), n);
    shape.push_back(it == t.names.end() ? 1 : t.data.shape()[it - t.names.begin()]);
  }
  moved.reshape(shape);
  return moved;
}

template <class Op>
NamedTensor combine(const NamedTensor& a, const NamedTensor& b, Op op) {
  for (const auto* t : {&a, &b})
    if (t->names.size() != t->data.dimension())
      throw Error(ErrorKind::rank_mismatch, "named tensor has " + std::to_string(t->names.size()) + " names for rank " +
                                                std::to_string(t->data.dimension()));
  std::vector<std::string> names = a.names;
  for (const auto& n : b.names)
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  for (const auto& n : b.names) {
    auto ia = std::find(a.names.begin(), a.names.end(), n);
    if (ia == a.names.end()) continue;
    std::size_t sa = a.data.shape()[ia - a.names.begin()], sb = b.data.shape()[b.dim(n)];
    if (sa != sb && sa != 1 && sb != 1)
      throw Error(ErrorKind::rank_mismatch, "dim " + n + " has size " + std::to_string(sa) + " in one operand and " +
                                                std::to_string(sb) + " in the other");
  }
  NamedTensor out;
  out.names = names;
  out.data = op(align(a, names), align(b, names));
  return out;
}

}  // namespace

NamedTensor named_add(const NamedTensor& a, const NamedTensor& b) {
  return combine(a, b, [](const Tensor& x, const Tensor& y) -> Tensor { return x + y; });
}

NamedTensor named_mul(const NamedTensor& a, const NamedTensor& b) {
  return combine(a, b, [](const Tensor& x, const Tensor& y) -> Tensor { return x * y; });
}

NamedTensor named_sum(const NamedTensor& a, const std::string& name) {
  NamedTensor out;
  std::size_t d = a.dim(name);
  for (std::size_t i = 0; i < a.names.size(); ++i)
    if (i != d) out.names.push_back(a.names[i]);
  out.data = xt::sum(a.data, {d}, xt::evaluation_strategy::immediate);
  return out;
}

}  // namespace shardlab
