#include "core/gemm.hpp"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "core/subnormal.hpp"

namespace shardlab {

namespace {

blasint dim(std::size_t v) {
  if (v > static_cast<std::size_t>(INT_MAX))
    throw Error(ErrorKind::unsupported, "a matrix dim of " + std::to_string(v) + " is beyond what BLAS indexes (int)");
  return static_cast<blasint>(v);
}

// A result below the smallest normal becomes a zero of its sign (core/dtype.hpp): it may be the
// next GEMM's operand. Under FTZ (core/subnormal.hpp) BLAS has already done it; this pass holds
// whatever the thread's state, at one read of C against the k reads of each element's sum, written
// as a select so that it is vectorised.
template <class T>
__attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic"))) void flush_all(T* c, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) c[i] = std::fabs(c[i]) < std::numeric_limits<T>::min() ? std::copysign(T(0), c[i]) : c[i];
}

template <class T, class Gemm>
void run(Gemm gemm, std::size_t batch, std::size_t m, std::size_t n, std::size_t k, const T* a, bool ta, const T* b,
         bool tb, T* c) {
  if (m == 0 || n == 0) return;
  if (counting_subnormals()) count_contraction(a, batch * m * k, b, batch * k * n);
  if (k == 0) {  // an empty sum: BLAS is not asked (some reject k = 0 with lda checks)
    std::fill(c, c + batch * m * n, T(0));
    return;
  }
  const blasint lda = dim(ta ? m : k), ldb = dim(tb ? k : n), ldc = dim(n);
  for (std::size_t t = 0; t < batch; ++t)
    gemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, dim(m), dim(n), dim(k), T(1),
         a + t * m * k, lda, b + t * k * n, ldb, T(0), c + t * m * n, ldc);
  flush_all(c, batch * m * n);
}

}  // namespace

void batched_gemm(std::size_t batch, std::size_t m, std::size_t n, std::size_t k, const double* a, bool trans_a,
                  const double* b, bool trans_b, double* c) {
  run<double>(cblas_dgemm, batch, m, n, k, a, trans_a, b, trans_b, c);
}

void batched_gemm(std::size_t batch, std::size_t m, std::size_t n, std::size_t k, const float* a, bool trans_a,
                  const float* b, bool trans_b, float* c) {
  run<float>(cblas_sgemm, batch, m, n, k, a, trans_a, b, trans_b, c);
}

}  // namespace shardlab
