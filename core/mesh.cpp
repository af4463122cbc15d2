#include "core/mesh.hpp"

#include <algorithm>
#include <sstream>

#include "core/error.hpp"
#include "core/text.hpp"

namespace shardlab {

Mesh::Mesh(std::vector<std::string> names, std::vector<int> sizes)
    : names_(std::move(names)), sizes_(std::move(sizes)) {
  if (names_.empty()) throw Error(ErrorKind::parse, "a mesh needs at least one axis, e.g. X=2,Y=4");
  if (names_.size() != sizes_.size()) throw Error(ErrorKind::parse, "mesh has different numbers of names and sizes");
  for (std::size_t i = 0; i < names_.size(); ++i) {
    if (!is_identifier(names_[i]))
      throw Error(ErrorKind::parse, "mesh axis name '" + names_[i] + "' is not a plain name (letters, digits, _)");
    if (names_[i] == "_")
      throw Error(ErrorKind::parse, "mesh axis name '_' is taken: in a spec, _ means a replicated dim; name the axis X, Y, data or similar");
    if (sizes_[i] < 1) throw Error(ErrorKind::parse, "mesh axis " + names_[i] + " has size " + std::to_string(sizes_[i]) + ", expected at least 1");
    for (std::size_t j = 0; j < i; ++j)
      if (names_[j] == names_[i]) throw Error(ErrorKind::duplicate_axis, "mesh axis " + names_[i] + " appears twice");
  }
  // Counted in 64 bits and stopped early: an int product overflows for e.g. 65536x65536 (to 0).
  long long total = 1;
  for (int s : sizes_)
    if ((total *= s) > 4096) break;
  if (total > 4096) throw Error(ErrorKind::parse, "mesh " + text() + " has more than 4096 devices; shardlab allows at most 4096");
}

Mesh Mesh::parse(const std::string& raw) {
  const std::string text = trim(raw);
  if (text.empty()) throw Error(ErrorKind::parse, "mesh is empty; expected e.g. X=2,Y=4 or 2x4");
  std::vector<std::string> names;
  std::vector<int> sizes;
  if (text.find('=') == std::string::npos) {
    static const char* shorthand[] = {"X", "Y", "Z", "W"};
    auto parts = split(text, 'x');
    for (std::size_t i = 0; i < parts.size(); ++i) {
      names.push_back(i < 4 ? shorthand[i] : "A" + std::to_string(i - 3));  // then A1, A2 ...
      sizes.push_back(static_cast<int>(parse_positive(trim(parts[i]), "mesh '" + text + "'")));
    }
    return Mesh(names, sizes);
  }
  for (const auto& part : split(text, ',')) {
    auto kv = split(part, '=');
    if (kv.size() != 2 || trim(kv[0]).empty())
      throw Error(ErrorKind::parse, "mesh entry '" + part + "' is not of the form NAME=SIZE (as in X=2,Y=4)");
    names.push_back(trim(kv[0]));
    sizes.push_back(static_cast<int>(parse_positive(trim(kv[1]), "mesh axis " + trim(kv[0]))));
  }
  return Mesh(names, sizes);
}

int Mesh::devices() const {
  int n = 1;
  for (int s : sizes_) n *= s;
  return n;
}

bool Mesh::has_axis(const std::string& name) const {
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

int Mesh::axis(const std::string& name) const {
  auto it = std::find(names_.begin(), names_.end(), name);
  if (it == names_.end())
    throw Error(ErrorKind::unknown_axis, "mesh " + text() + " has no axis named " + name);
  return static_cast<int>(it - names_.begin());
}

int Mesh::axes_size(const std::vector<std::string>& axes) const {
  int n = 1;
  for (const auto& a : axes) n *= axis_size(a);
  return n;
}

std::vector<int> Mesh::coords(int device) const {
  std::vector<int> c(names_.size());
  for (int i = rank() - 1; i >= 0; --i) {
    c[i] = device % sizes_[i];
    device /= sizes_[i];
  }
  return c;
}

int Mesh::device(const std::vector<int>& coords) const {
  int d = 0;
  for (int i = 0; i < rank(); ++i) d = d * sizes_[i] + coords[i];
  return d;
}

std::vector<int> Mesh::group(int device, const std::vector<std::string>& axes) const {
  std::vector<int> base = coords(device);
  std::vector<int> idx;
  for (const auto& a : axes) idx.push_back(axis(a));
  int n = axes_size(axes);
  std::vector<int> members;
  for (int k = 0; k < n; ++k) {
    std::vector<int> c = base;
    int rest = k;
    for (int i = static_cast<int>(idx.size()) - 1; i >= 0; --i) {
      c[idx[i]] = rest % sizes_[idx[i]];
      rest /= sizes_[idx[i]];
    }
    members.push_back(this->device(c));
  }
  return members;
}

std::vector<std::vector<int>> Mesh::groups(const std::vector<std::string>& axes) const {
  std::vector<std::vector<int>> out;
  std::vector<bool> seen(devices(), false);
  for (int d = 0; d < devices(); ++d) {
    if (seen[d]) continue;
    auto g = group(d, axes);
    for (int m : g) seen[m] = true;
    out.push_back(g);
  }
  return out;
}

int Mesh::index_along(int device, const std::vector<std::string>& axes) const {
  auto c = coords(device);
  int k = 0;
  for (const auto& a : axes) k = k * axis_size(a) + c[axis(a)];
  return k;
}

std::string Mesh::text() const {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < names_.size(); ++i) parts.push_back(names_[i] + "=" + std::to_string(sizes_[i]));
  return join(parts, ",");
}

std::string Mesh::picture(const std::function<std::string(int)>& label, std::size_t columns) const {
  const int cols = sizes_.back();
  const int rows = rank() >= 2 ? sizes_[rank() - 2] : 1;
  const int planes = devices() / (rows * cols);
  const std::string row_axis = rank() >= 2 ? names_[rank() - 2] : "";
  // Each row of boxes starts with its coordinate, "X=0  ", padded to the same width on every row.
  const std::size_t lead =
      row_axis.empty() ? 0 : row_axis.size() + 2 + std::max<std::size_t>(2, std::to_string(rows - 1).size());
  // A box is its label, a space either side and a bar: width + 3 columns, after the row's first bar.
  const std::size_t room = columns > lead + 1 ? columns - lead - 1 : 0;
  const std::size_t most = room > 4 ? room - 3 : 1;  // the widest label one box in a line can hold
  auto text_of = [&](int d) {
    std::string s = label ? label(d) : "d" + std::to_string(d);
    return s.size() > most ? s.substr(0, most - 1) + "~" : s;  // a label too wide for any line, cut
  };
  std::size_t width = 0;
  for (int d = 0; d < devices(); ++d) width = std::max(width, text_of(d).size());
  // Too many boxes for one line: the columns go in bands of equal size, one under the other, each
  // headed by the indices of the last axis it shows, so no line is wider than `columns`.
  const int fit = std::max(1, static_cast<int>(room / (width + 3)));
  const int bands = (cols + fit - 1) / fit;
  const int per = (cols + bands - 1) / bands;
  const std::string indent(lead, ' ');
  std::ostringstream out;
  for (int p = 0; p < planes; ++p) {
    if (rank() > 2) {
      auto c0 = coords(p * rows * cols);
      std::vector<std::string> lead_axes;
      for (int i = 0; i < rank() - 2; ++i) lead_axes.push_back(names_[i] + "=" + std::to_string(c0[i]));
      out << join(lead_axes, ", ") << ":\n";
    }
    for (int first = 0; first < cols; first += per) {
      const int last = std::min(cols, first + per);
      std::string rule = "+";
      for (int c = first; c < last; ++c) rule += std::string(width + 2, '-') + "+";
      out << indent << " " << names_.back();
      if (bands > 1) out << "=" << first << ".." << last - 1 << " of " << cols;
      out << " ->\n" << indent << rule << "\n";
      for (int r = 0; r < rows; ++r) {
        if (!row_axis.empty()) {
          const std::string tag = row_axis + "=" + std::to_string(r);
          out << tag << std::string(lead - tag.size(), ' ');
        }
        out << "|";
        for (int c = first; c < last; ++c) {
          std::string s = text_of(p * rows * cols + r * cols + c);
          out << " " << s << std::string(width - s.size(), ' ') << " |";
        }
        out << "\n" << indent << rule << "\n";
      }
    }
  }
  return out.str();
}

std::vector<std::string> parse_axes(const Mesh& mesh, const std::string& raw) {
  std::string text = trim(raw);
  if (text.size() >= 2 && text.front() == '(' && text.back() == ')') text = text.substr(1, text.size() - 2);
  std::vector<std::string> axes;
  if (trim(text).empty()) return axes;
  for (const auto& part : split(text, ',')) {
    std::string a = trim(part);
    mesh.axis(a);
    if (std::find(axes.begin(), axes.end(), a) != axes.end())
      throw Error(ErrorKind::duplicate_axis, "mesh axis " + a + " is named twice in '" + raw + "'");
    axes.push_back(a);
  }
  return axes;
}

std::string axes_text(const std::vector<std::string>& axes) { return join(axes, ","); }

Uneven parse_uneven(const std::string& raw) {
  const std::string t = trim(raw);
  if (t == "none") return Uneven::none;
  if (t == "chunk") return Uneven::chunk;
  if (t == "pad") return Uneven::pad;
  throw Error(ErrorKind::parse, "--uneven is '" + raw + "'; use chunk (blocks of ceil(d/n), the last shorter), pad "
                                "(every block ceil(d/n), zero-padded) or none (refuse dims that do not divide)");
}

std::string uneven_name(Uneven u) { return u == Uneven::chunk ? "chunk" : u == Uneven::pad ? "pad" : "none"; }

}  // namespace shardlab
