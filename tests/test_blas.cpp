// core/blas.cpp: one BLAS thread per device (OpenBLAS asked directly), and a description that
// names the library and one kernel set, as benchmark headers print it.
#include <doctest/doctest.h>

#include <cblas.h>

#include <string>

#include "core/blas.hpp"

using namespace shardlab;

TEST_CASE("use_one_blas_thread leaves OpenBLAS with one thread") {
  openblas_set_num_threads(2);
  if (openblas_get_num_threads() != 2) {  // a single-threaded OpenBLAS build: nothing to lower
    MESSAGE("this OpenBLAS runs one thread only; nothing to check");
    return;
  }
  use_one_blas_thread();
  CHECK(openblas_get_num_threads() == 1);
}

TEST_CASE("blas_description names the library and a kernel set") {
  const std::string d = blas_description();
  CHECK(d.rfind("OpenBLAS ", 0) == 0);  // the build line starts with the library and its version
  const std::size_t at = d.find("(kernels: ");
  REQUIRE(at != std::string::npos);
  const std::string core = d.substr(at + 10, d.size() - at - 11);
  CHECK_FALSE(core.empty());
  CHECK(d.back() == ')');
  CHECK(core.find(' ') == std::string::npos);  // one kernel-set name, like Haswell or SkylakeX
}
