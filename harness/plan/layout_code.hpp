// The planner search's layouts as fixed-size values: no allocation to copy, hash or compare one
// (internal to the planner, as plan_search_layouts.hpp).
//
// The search numbers a mesh's axes of size 2 or more in mesh order (axes of size 1 split nothing
// and never appear in its layouts). A layout is edited as a Lay: each dim's axis numbers, major
// first, and the partial axes. It is stored as a Code: the sequence "dim 0's axes, '|', dim 1's
// axes, '|', ..., '#', partial axes" packed 4 bits a symbol (0 ends the sequence, 1 is '#', axis i
// is 2 + i, 15 is '|') into two 64-bit words, the first symbol in the top bits. Codes then compare
// as the sequences do, symbol by symbol, a shorter one first: the order of equal-cost layouts the
// search breaks ties by. A layout's key is its code with the partial axes sorted (the order
// partial sums are listed in means nothing).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/mesh.hpp"
#include "core/spec.hpp"

namespace shardlab::search_detail {

constexpr int kMaxSearchAxes = 13;  // axis numbers 0..12: symbols 2..14
constexpr int kCodeSymbols = 32;    // dims + 1 + axes used: rank 25 with 6 axes

// Up to kMaxSearchAxes axis numbers, in order.
struct AxisList {
  std::uint8_t n = 0;
  std::uint8_t at[kMaxSearchAxes] = {};

  std::size_t size() const { return n; }
  bool empty() const { return n == 0; }
  const std::uint8_t* begin() const { return at; }
  const std::uint8_t* end() const { return at + n; }
  std::uint8_t* begin() { return at; }
  std::uint8_t* end() { return at + n; }
  std::uint8_t back() const { return at[n - 1]; }
  void push_back(int axis) { at[n++] = static_cast<std::uint8_t>(axis); }
  void pop_back() { --n; }
  void resize(std::size_t k) { n = static_cast<std::uint8_t>(k); }
  void clear() { n = 0; }
  std::uint32_t mask() const {  // bit i set for axis number i
    std::uint32_t m = 0;
    for (std::uint8_t a : *this) m |= 1u << a;
    return m;
  }
  bool operator==(const AxisList& o) const {
    if (n != o.n) return false;
    for (int i = 0; i < n; ++i)
      if (at[i] != o.at[i]) return false;
    return true;
  }
};

// A layout as the search edits it.
struct Lay {
  std::vector<AxisList> dims;
  AxisList partial;
};

// A layout packed, as stored, hashed and compared.
struct Code {
  std::uint64_t hi = 0, lo = 0;
  bool operator==(const Code& o) const { return hi == o.hi && lo == o.lo; }
  bool operator!=(const Code& o) const { return !(*this == o); }
  bool operator<(const Code& o) const { return hi != o.hi ? hi < o.hi : lo < o.lo; }
};
struct CodeHash {
  std::size_t operator()(const Code& c) const {
    // Mixes both words (the 64-bit finaliser of MurmurHash3): short codes differ only in hi.
    std::uint64_t h = c.hi * 0x9e3779b97f4a7c15ull ^ c.lo;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return static_cast<std::size_t>(h);
  }
};

// Packs l; with sort_partial, its key. Error(unsupported) when the layout has more than
// kCodeSymbols symbols.
Code encode(const Lay& l, bool sort_partial = false);
void decode(const Code& code, Lay& l);
Code key_of_code(const Code& code);  // the partial axes sorted

// The search's numbering of one mesh's axes, and the conversions between Specs and codes.
class AxisNumbers {
 public:
  // Error(unsupported) for a mesh with more than kMaxSearchAxes axes of size 2 or more.
  explicit AxisNumbers(const Mesh& mesh);
  int count() const { return static_cast<int>(names_.size()); }
  int size(int axis) const { return sizes_[static_cast<std::size_t>(axis)]; }
  const std::string& name(int axis) const { return names_[static_cast<std::size_t>(axis)]; }
  // The number of a named axis; Error for an unknown axis or one of size 1.
  int number(const std::string& axis) const;

  Lay lay_of(const Spec& s) const;
  Spec spec_of(const Lay& l) const;
  Code code_of(const Spec& s) const { return encode(lay_of(s)); }
  Code key_of(const Spec& s) const { return encode(lay_of(s), true); }
  Spec spec_of(const Code& code) const;
  std::vector<std::string> names_of(const AxisList& axes) const;

 private:
  std::vector<std::string> names_;
  std::vector<int> sizes_;
  const Mesh* mesh_;
};

}  // namespace shardlab::search_detail
