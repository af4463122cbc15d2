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
// Each dim that does not divide its mesh axes, one line each, with the real rows of the
// distinct blocks in order, e.g. under chunk
//   "A dim I: 50257 rows over X in 8 blocks: 6283 rows x 7, 6276 x 1"
// and under pad "...: 6283 rows each, padding 0 x 7, 7 x 1 (7 of 50264)" (padding rows of the
// blocks in order; in all, of the rows stored).
// Empty when every dim divides.
std::string uneven_text(const Mesh& mesh, const Spec& spec, const Shape& shape, const std::string& tensor,
                        const std::vector<std::string>& dim_names = {});

}  // namespace shardlab
