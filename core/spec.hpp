// Spec: how a tensor is laid out over a mesh, one entry per tensor dim.
//   "_"      the dim is replicated (every device holds all of it)
//   "Y"      the dim is split over mesh axis Y (evenly, or as the mesh's Uneven rule says)
//   "(X,Y)"  the dim is split over X then Y (X major): X*Y shards
// An optional suffix "{Y}" (or "{U_Y}") marks unreduced partial sums over mesh axis Y:
// the true tensor is the sum of the blocks held along Y.
// Printed as in the JAX scaling book: A[I_X, J_Y], C[I, K]{U_Y}.
#pragma once
#include <string>
#include <vector>

#include "core/mesh.hpp"
#include "core/tensor.hpp"

namespace shardlab {

struct Spec {
  std::vector<std::vector<std::string>> dims;  // per tensor dim: mesh axes, major first; empty = replicated
  std::vector<std::string> partial;            // mesh axes holding unreduced partial sums

  static Spec parse(const std::string& text);       // syntax only
  static Spec replicated(std::size_t rank);         // "_,_,..."
  std::size_t rank() const { return dims.size(); }
  bool is_partial() const { return !partial.empty(); }
  std::vector<std::string> used_axes() const;       // every axis in dims, then partial, in order
  int shards(const Mesh& mesh, std::size_t dim) const;  // product of the dim's mesh axis sizes

  std::string text() const;  // "X,_,Y" / "(X,Y),_{Y}"
  // "A[I_X, J]{U_Y}"; dim letters default to I, J, K, L, ...
  std::string notation(const std::string& tensor, const std::vector<std::string>& dim_names = {}) const;

  // Checks the spec against a mesh and a tensor shape; throws Error naming the axis, dim and sizes.
  // A dim that does not divide its axes is refused only under the mesh's Uneven::none.
  void validate(const Mesh& mesh, const Shape& shape, const std::string& tensor) const;
  // Only the mesh part: axes exist, none used twice.
  void validate_axes(const Mesh& mesh, const std::string& tensor) const;

  bool operator==(const Spec& o) const { return dims == o.dims && partial == o.partial; }
  bool operator!=(const Spec& o) const { return !(*this == o); }
};

}  // namespace shardlab
