// core/blas.cpp: one BLAS thread per device, and a description that names the kernels in use
// (checked against OpenBLAS's own answers, asked directly here).
#include <doctest/doctest.h>

#include <cblas.h>

#include <string>

#include "core/blas.hpp"

using namespace shardlab;

TEST_CASE("use_one_blas_thread leaves OpenBLAS with one thread") {
  openblas_set_num_threads(2);
  use_one_blas_thread();
  CHECK(openblas_get_num_threads() == 1);
}

TEST_CASE("blas_description names the build and the kernel set") {
  const std::string d = blas_description();
  CHECK(d.rfind("OpenBLAS", 0) == 0);
  CHECK(d.find(openblas_get_config()) != std::string::npos);
  CHECK(d.find(std::string("(kernels: ") + openblas_get_corename() + ")") != std::string::npos);
}
