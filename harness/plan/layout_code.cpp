#include "harness/plan/layout_code.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "harness/plan/operands.hpp"

namespace shardlab::search_detail {

namespace {

constexpr unsigned kEnd = 0, kHash = 1, kBar = 15;
constexpr unsigned kAxis0 = 2;  // symbol of axis number 0

// Symbols are shifted in at the low end of a 128-bit word, then moved up to the top.
using Word = unsigned __int128;

void put(Word& w, unsigned symbol) { w = w << 4 | symbol; }

unsigned symbol_at(const Code& c, int i) {
  const std::uint64_t word = i < 16 ? c.hi : c.lo;
  return static_cast<unsigned>(word >> (60 - 4 * (i % 16))) & 15u;
}

}  // namespace

Code encode(const Lay& l, bool sort_partial) {
  std::size_t symbols = l.dims.size() + 1 + l.partial.size();
  for (const auto& d : l.dims) symbols += d.size();
  if (symbols > kCodeSymbols)
    throw Error(ErrorKind::unsupported, "a layout has more than " + std::to_string(kCodeSymbols) +
                                            " dims and mesh axes together; the planner's search takes at most that");
  Word w = 0;
  for (const auto& d : l.dims) {
    for (std::uint8_t a : d) put(w, kAxis0 + a);
    put(w, kBar);
  }
  put(w, kHash);
  if (sort_partial && l.partial.size() > 1) {
    AxisList partial = l.partial;
    std::sort(partial.begin(), partial.end());
    for (std::uint8_t a : partial) put(w, kAxis0 + a);
  } else {
    for (std::uint8_t a : l.partial) put(w, kAxis0 + a);
  }
  w <<= 4 * (kCodeSymbols - symbols);
  return {static_cast<std::uint64_t>(w >> 64), static_cast<std::uint64_t>(w)};
}

void decode(const Code& code, Lay& l) {
  l.dims.clear();
  l.partial.clear();
  AxisList* into = nullptr;
  bool partial = false;
  for (int i = 0; i < kCodeSymbols; ++i) {
    const unsigned s = symbol_at(code, i);
    if (s == kEnd) break;
    if (s == kHash) {
      partial = true;
      continue;
    }
    if (partial) {
      l.partial.push_back(static_cast<int>(s - kAxis0));
      continue;
    }
    if (!into) into = &l.dims.emplace_back();
    if (s == kBar) into = nullptr;
    else into->push_back(static_cast<int>(s - kAxis0));
  }
}

Code key_of_code(const Code& code) {
  Lay l;
  decode(code, l);
  return encode(l, true);
}

AxisNumbers::AxisNumbers(const Mesh& mesh) : mesh_(&mesh) {
  for (int i = 0; i < mesh.rank(); ++i) {
    const int size = mesh.sizes()[static_cast<std::size_t>(i)];
    if (size < 2) continue;
    names_.push_back(mesh.names()[static_cast<std::size_t>(i)]);
    sizes_.push_back(size);
  }
  if (count() > kMaxSearchAxes)
    throw Error(ErrorKind::unsupported, "mesh " + mesh.text() + " has " + std::to_string(count()) +
                                            " axes of size 2 or more; the planner's search takes at most " +
                                            std::to_string(kMaxSearchAxes));
}

int AxisNumbers::number(const std::string& axis) const {
  for (std::size_t i = 0; i < names_.size(); ++i)
    if (same_axis(names_[i], axis)) return static_cast<int>(i);
  mesh_->axis(axis);  // throws, naming an unknown axis
  throw Error(ErrorKind::unsupported, "axis " + axis + " of size 1 reached the planner's search");
}

Lay AxisNumbers::lay_of(const Spec& s) const {
  Lay l;
  l.dims.resize(s.dims.size());
  for (std::size_t d = 0; d < s.dims.size(); ++d)
    for (const auto& a : s.dims[d]) l.dims[d].push_back(number(a));
  for (const auto& a : s.partial) l.partial.push_back(number(a));
  return l;
}

std::vector<std::string> AxisNumbers::names_of(const AxisList& axes) const {
  std::vector<std::string> out;
  for (std::uint8_t a : axes) out.push_back(name(a));
  return out;
}

Spec AxisNumbers::spec_of(const Lay& l) const {
  Spec s = Spec::replicated(l.dims.size());
  for (std::size_t d = 0; d < l.dims.size(); ++d) s.dims[d] = names_of(l.dims[d]);
  s.partial = names_of(l.partial);
  return s;
}

Spec AxisNumbers::spec_of(const Code& code) const {
  Lay l;
  decode(code, l);
  return spec_of(l);
}

}  // namespace shardlab::search_detail
