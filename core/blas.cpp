#include "core/blas.hpp"

#include <cblas.h>

namespace shardlab {

void use_one_blas_thread() { openblas_set_num_threads(1); }

std::string blas_description() {
  return std::string(openblas_get_config()) + " (kernels: " + openblas_get_corename() + ")";
}

}  // namespace shardlab
