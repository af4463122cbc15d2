// Strided-batch matrix products straight on CBLAS, with its transpose flags instead of copies.
// Kept apart from xtensor-blas: <cblas.h> clashes with its declarations (see core/blas.hpp).
//   for t in [0, batch): C_t[m,n] = op(A_t) op(B_t), op = transpose when the flag says so
// A_t starts at a + t*m*k and is stored [m,k] (or [k,m] when trans_a); B_t at b + t*k*n, stored
// [k,n] (or [n,k] when trans_b); C_t at c + t*m*n, [m,n]. Row-major, contiguous.
#pragma once
#include <cstddef>

namespace shardlab {

void batched_gemm(std::size_t batch, std::size_t m, std::size_t n, std::size_t k, const double* a, bool trans_a,
                  const double* b, bool trans_b, double* c);
void batched_gemm(std::size_t batch, std::size_t m, std::size_t n, std::size_t k, const float* a, bool trans_a,
                  const float* b, bool trans_b, float* c);

}  // namespace shardlab
