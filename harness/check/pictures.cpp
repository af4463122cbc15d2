#include "harness/check/pictures.hpp"

#include "core/layout.hpp"
#include "core/text.hpp"

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

namespace {
// "6283 rows x 7, 6276 x 1": runs of equal values, in order.
std::string runs(const std::vector<std::size_t>& v, const std::string& unit) {
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j < v.size() && v[j] == v[i]) ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(v[i]) + (out.empty() ? unit : "") + " x " + std::to_string(j - i);
    i = j;
  }
  return out;
}
}  // namespace

std::string uneven_text(const Mesh& mesh, const Spec& spec, const Shape& shape, const std::string& tensor,
                        const std::vector<std::string>& dim_names) {
  std::string out;
  for (std::size_t i = 0; i < spec.rank() && i < shape.size(); ++i) {
    const std::size_t n = static_cast<std::size_t>(spec.shards(mesh, i));
    if (shape[i] % n == 0) continue;
    std::vector<std::size_t> real(n), padding(n);
    for (int d = 0; d < mesh.devices(); ++d) {  // block k: the devices at index k along the dim's axes
      const std::size_t k = static_cast<std::size_t>(mesh.index_along(d, spec.dims[i]));
      const DimBlock b = dim_block(mesh, spec, shape, i, d);
      real[k] = b.stop - b.start;
      padding[k] = b.stored - real[k];
    }
    const std::string name = i < dim_names.size() ? dim_names[i] : std::to_string(i);
    out += tensor + " dim " + name + ": " + std::to_string(shape[i]) + " rows over " + join(spec.dims[i], ",") +
           " in " + std::to_string(n) + " blocks: ";
    if (mesh.uneven() == Uneven::pad) {
      std::size_t pads = 0;
      for (std::size_t p : padding) pads += p;
      out += std::to_string(real[0] + padding[0]) + " rows each, padding " + runs(padding, "") + " (" +
             std::to_string(pads) + " of " + std::to_string(shape[i] + pads) + ")\n";
    } else {
      out += runs(real, " rows") + "\n";
    }
  }
  return out;
}

}  // namespace shardlab
