// The operands A and B of `shardlab matmul` and `shardlab einsum`: read from .npy files (checked
// against the sizes the command line asks for) or seeded random integers, made only once the run is
// known to fit; then held as the run's element type holds them, and refused when a value or the
// product overflows that type, before anything runs.
#pragma once
#include <cstdint>
#include <string>

#include "core/einsum.hpp"
#include "core/tensor.hpp"
#include "harness/check/npy.hpp"

namespace shardlab {

struct ContractionInputs {
  Tensor a, b;         // empty until fill_random() for random inputs
  Shape shape_a, shape_b;
  std::string source;
  NpyType type = NpyType::float64;
  bool from_files() const { return source.rfind("random", 0) != 0; }
};

// A and B from a_in and b_in (both or neither), else the shapes of random integers of `seed`.
// `asked` are the sizes the command line gives (empty: 4,16,4 for a matmul; an einsum must give them).
ContractionInputs read_inputs(const Einsum& eq, DimSizes asked, bool einsum, const std::string& a_in,
                              const std::string& b_in, std::uint64_t seed);

// Random inputs are made only once the run is known to fit: --plan-only never allocates them.
void fill_random(ContractionInputs& in, std::uint64_t seed);

// Rounds A and B to `dtype` (the reference then starts from the same numbers) and refuses inputs that
// round to inf, or, from files, whose product (`summed` terms per element of `result`) overflows.
// `broadcast`: the broadcast-and-sum einsum fits in memory (else BLAS forms the product).
void round_inputs(ContractionInputs& in, const Einsum& eq, DType dtype, std::size_t summed, bool broadcast,
                  const std::string& result);

}  // namespace shardlab
