#include "harness/check/pictures.hpp"

#include "core/layout.hpp"

namespace shardlab {

std::string blocks_picture(const Mesh& mesh, const Spec& spec, const Shape& shape) {
  return mesh.picture([&](int d) { return block_of(mesh, spec, shape, d).text(); });
}

std::string layout_summary(const Mesh& mesh, const Spec& spec, const Shape& shape, const std::string& tensor,
                           const std::vector<std::string>& dim_names) {
  // Partial sums differ along the partial axes too: distinct = shards x partial group size.
  int shards = mesh.axes_size(spec.partial);
  for (std::size_t i = 0; i < spec.rank(); ++i) shards *= spec.shards(mesh, i);
  const int copies = mesh.devices() / shards;
  return spec.notation(tensor, dim_names) + ": " + std::to_string(shards) + " distinct " +
         (spec.partial.empty() ? "" : "partial ") + "block" + (shards == 1 ? "" : "s") + " of " +
         shape_text(local_shape(mesh, spec, shape)) + ", each held by " +
         std::to_string(copies) + " device" + (copies == 1 ? "" : "s");
}

}  // namespace shardlab
