// core/blas.cpp: one BLAS thread per device (OpenBLAS asked directly); SkylakeX kernels on an AVX-512
// CPU unless the user set OPENBLAS_CORETYPE; a description that names the library, the kernel set and
// who chose it, as benchmark headers print it.
#include <doctest/doctest.h>

#include <cblas.h>

#include <cstdlib>
#include <string>

#include "core/blas.hpp"
#include "tests/run_binary.hpp"

using namespace shardlab;
using shardlab::testing::run_binary;

namespace {

// The same check core/blas.cpp makes before it asks for SkylakeX kernels.
bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
}

// "... (kernels: SkylakeX, chosen by ...)" -> "SkylakeX"; "" when the text has no such part.
std::string kernel_set(const std::string& d) {
  const std::size_t at = d.find("(kernels: ");
  if (at == std::string::npos) return "";
  const std::size_t end = d.find(", ", at);
  return end == std::string::npos ? "" : d.substr(at + 10, end - at - 10);
}

// The environment of a child with no kernel setting of anyone's, user's or ours.
const std::string no_setting = "env -u OPENBLAS_CORETYPE -u SHARDLAB_CHOSE_CORETYPE ";

}  // namespace

TEST_CASE("use_one_blas_thread leaves OpenBLAS with one thread") {
  openblas_set_num_threads(2);
  if (openblas_get_num_threads() != 2) {  // a single-threaded OpenBLAS build: nothing to lower
    MESSAGE("this OpenBLAS runs one thread only; nothing to check");
    return;
  }
  use_one_blas_thread();
  CHECK(openblas_get_num_threads() == 1);
}

TEST_CASE("blas_description names the library, the kernel set in use and who chose it") {
  const std::string d = blas_description();
  CHECK(d.rfind("OpenBLAS ", 0) == 0);  // the build line starts with the library and its version
  CHECK(kernel_set(d) == openblas_get_corename());
  CHECK(d.back() == ')');
  const bool chosen = d.find(", chosen by shardlab for this AVX-512 CPU)") != std::string::npos ||
                      d.find(", chosen by OpenBLAS)") != std::string::npos ||
                      d.find(" set by the user)") != std::string::npos;
  CHECK_MESSAGE(chosen, d);
}

// The doctest binary runs this one again in a clean environment (next test case), so it is checked
// there even when the suite itself runs with the user's OPENBLAS_CORETYPE.
TEST_CASE("this process runs the BLAS kernel set its environment asks for") {
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  const std::string d = blas_description();
  INFO(d);
  if (!set) {
    CHECK_FALSE(cpu_has_avx512());  // on AVX-512 the start-up re-exec should have set it
  } else if (d.find("chosen by shardlab") != std::string::npos) {
    CHECK(std::string(set) == "SkylakeX");
    CHECK(std::string(openblas_get_corename()) == "SkylakeX");
  } else {
    CHECK(d.find(std::string("OPENBLAS_CORETYPE=") + set + " set by the user)") != std::string::npos);
  }
}

TEST_CASE("on an AVX-512 CPU with no OPENBLAS_CORETYPE, shardlab and the doctest binary use SkylakeX kernels") {
  const auto r = run_binary("shardlab version", no_setting);
  REQUIRE(r.status == 0);
  INFO(r.out);
  if (cpu_has_avx512()) {
    CHECK(kernel_set(r.out) == "SkylakeX");
    CHECK(r.out.find("(kernels: SkylakeX, chosen by shardlab for this AVX-512 CPU)\n") != std::string::npos);
  } else {
    CHECK(r.out.find(", chosen by OpenBLAS)\n") != std::string::npos);
  }
  const auto t = run_binary("tests '-tc=this process runs the BLAS kernel set*'", no_setting);
  INFO(t.out);
  CHECK(t.status == 0);
  CHECK(t.out.find("test cases: 1 | 1 passed") != std::string::npos);
}

TEST_CASE("OPENBLAS_CORETYPE set by the user wins") {
  const auto r = run_binary("shardlab version", "env OPENBLAS_CORETYPE=Haswell ");
  REQUIRE(r.status == 0);
  INFO(r.out);
  CHECK(r.out.find(", OPENBLAS_CORETYPE=Haswell set by the user)\n") != std::string::npos);
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))  // else OpenBLAS falls back
    CHECK(kernel_set(r.out) == "Haswell");
}
