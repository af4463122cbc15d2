// BLAS settings and facts, kept apart from xtensor-blas: <cblas.h> clashes with its declarations.
#pragma once
#include <string>

namespace shardlab {

void use_one_blas_thread();      // many devices share 2 cores: one BLAS thread each
void use_all_blas_threads();     // one program alone (the unsharded reference): every core
// While it lives, one BLAS thread, as every device computes (Runtime pins it); then the count
// before. A threaded sgemm may sum a product's terms in another order than the one-thread kernel.
class OneBlasThread {
 public:
  OneBlasThread();
  ~OneBlasThread();
  OneBlasThread(const OneBlasThread&) = delete;
  OneBlasThread& operator=(const OneBlasThread&) = delete;

 private:
  int before_ = 1;
};
// "OpenBLAS 0.3.21 ... (kernels: SkylakeX, chosen by shardlab for this AVX-512 CPU)", or
// "(kernels: Haswell, OPENBLAS_CORETYPE=Haswell set by the user)", for benchmark headers.
// On an AVX-512 CPU every program that links this file runs with SkylakeX kernels unless the user
// set OPENBLAS_CORETYPE (blas.cpp says how and why).
std::string blas_description();

}  // namespace shardlab
