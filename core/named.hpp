// Named axes, as in Mesh-TensorFlow / T5 and Flax.
//  - A mapping from tensor axis names to mesh axes ("input_rows:mesh_rows,input_cols:mesh_cols",
//    or Flax-style logical rules "batch->X,embed->Y") turns a tensor's dim names into a Spec.
//  - NamedTensor broadcasting matches dims by name, not by position.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/mesh.hpp"
#include "core/spec.hpp"
#include "core/tensor.hpp"

namespace shardlab {

// Ordered (tensor axis name, mesh axis) pairs. Accepts "a:b" or "a->b", comma separated; "" or "{}" is empty.
using AxisMapping = std::vector<std::pair<std::string, std::string>>;
AxisMapping parse_mapping(const std::string& text);
std::string mapping_text(const AxisMapping& mapping);  // "{input_rows: mesh_rows}"

// Each dim whose name the mapping lists is split over that mesh axis; the rest are replicated.
// Validates against the mesh (unknown axis, axis used twice) and, when `shape` is given, divisibility.
Spec spec_from_mapping(const std::vector<std::string>& dim_names, const AxisMapping& mapping, const Mesh& mesh,
                       const std::string& tensor, const Shape& shape = {});

// A mapping written for one tensor (a lesson's --mapping) must name only its axes: a name it
// lacks is most likely a typo, so it is an error rather than a silently replicated dim. (Rule
// tables shared by several tensors, such as lesson 08's, skip this check on purpose.)
void check_mapping_names(const AxisMapping& mapping, const std::vector<std::string>& dim_names,
                         const std::string& tensor);

struct NamedTensor {
  std::vector<std::string> names;  // one per dim
  Tensor data;
  std::size_t dim(const std::string& name) const;  // throws Error(rank_mismatch) if absent
};

// Elementwise a op b with dims matched by name: the result has a's dims, then b's dims that a lacks.
// Matched dims must have equal sizes or size 1 in one operand.
NamedTensor named_add(const NamedTensor& a, const NamedTensor& b);
NamedTensor named_mul(const NamedTensor& a, const NamedTensor& b);
NamedTensor named_sum(const NamedTensor& a, const std::string& name);  // reduce one named dim

}  // namespace shardlab
