// BLAS settings and facts, kept apart from xtensor-blas: <cblas.h> clashes with its declarations.
#pragma once
#include <string>

namespace shardlab {

void use_one_blas_thread();      // many devices share 2 cores: one BLAS thread each
std::string blas_description();  // "OpenBLAS 0.3.21 ... (core Haswell)" for benchmark headers

}  // namespace shardlab
