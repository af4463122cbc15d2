// Pictures for lessons: the mesh with what each device holds written in its box.
#pragma once
#include <string>

#include "core/mesh.hpp"
#include "core/spec.hpp"
#include "core/tensor.hpp"

namespace shardlab {

// Each device's index ranges of a tensor of `shape` under `spec`, e.g. "[0:16, 64:128]".
std::string blocks_picture(const Mesh& mesh, const Spec& spec, const Shape& shape);
// A one-line description: "X[I_mesh_rows, J_mesh_cols]: 8 blocks of [16, 64], 1 copy each".
std::string layout_summary(const Mesh& mesh, const Spec& spec, const Shape& shape, const std::string& tensor,
                           const std::vector<std::string>& dim_names = {});

}  // namespace shardlab
