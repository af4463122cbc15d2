#include "core/blas.hpp"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <cstring>

namespace shardlab {

namespace {

// OpenBLAS (DYNAMIC_ARCH) picks its kernel set once, in its load-time constructor, and lets only
// OPENBLAS_CORETYPE override it. Its SkylakeX (AVX-512) dgemm and sgemm beat the Haswell (AVX2) ones
// (`shardlab sweep --what machine` shows the GEMM rate), so on an AVX-512 CPU, unless the user set OPENBLAS_CORETYPE, we
// re-execute the program with OPENBLAS_CORETYPE=SkylakeX before anything else has run.
//
// Why a re-exec and not setenv(): a function in .preinit_array runs before every shared library's
// constructor, but on glibc 2.36 also before libc's own, which then sets environ back to the
// envp the kernel gave, dropping anything setenv() added; environ is even empty at that point, so
// getenv() finds nothing (tried: the variable never reached OpenBLAS). The envp argument is right,
// though, and an exec this early has printed nothing, started no thread and no MPI.
//
// The same exec sets GLIBC_TUNABLES=glibc.malloc.hugetlb=1 unless the user set GLIBC_TUNABLES:
// malloc then asks for transparent huge pages (madvise), so a large tensor's first touch costs one
// fault per 2 MiB instead of one per 4 KiB. Measured on the article-size FFN forward (float32,
// gspmd 2x4): 1.24M page faults and a 16.1 s sharded run before, 14k faults and 8.9 s after.
//
// The exec'd environment holds OPENBLAS_CORETYPE, which is exactly what stops a second exec; it
// stays there, so programs ours start (mpiexec ranks, tests running binaries) inherit the choice
// without an exec of their own. If the exec fails (no /proc), OpenBLAS's own pick stands.
void choose_blas_kernels(int, char** argv, char** envp) {
  if (!envp) return;
  __builtin_cpu_init();  // we run before libgcc's constructor that would initialise the CPU data
  // The instruction sets OpenBLAS's SkylakeX kernels use (its own check is similar).
  bool kernels = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512vl");
  // Huge pages for the heap (see core/memory.hpp): glibc reads its tunables once, at start, too.
  bool huge = true;
  std::size_t n = 0;
  for (; envp[n]; ++n) {
    if (std::strncmp(envp[n], "OPENBLAS_CORETYPE=", 18) == 0) kernels = false;  // the user's choice wins
    if (std::strncmp(envp[n], "GLIBC_TUNABLES=", 15) == 0) huge = false;        // likewise
  }
  if (!kernels && !huge) return;
  char** env = static_cast<char**>(std::malloc((n + 4) * sizeof(char*)));
  if (!env) return;
  std::memcpy(env, envp, n * sizeof(char*));
  if (kernels) {
    env[n++] = const_cast<char*>("OPENBLAS_CORETYPE=SkylakeX");
    env[n++] = const_cast<char*>("SHARDLAB_CHOSE_CORETYPE=SkylakeX");  // tells blas_description() it was us
  }
  if (huge) env[n++] = const_cast<char*>("GLIBC_TUNABLES=glibc.malloc.hugetlb=1");
  env[n] = nullptr;
  ::execve("/proc/self/exe", argv, env);
  std::free(env);
}

// glibc calls the functions in the program's .preinit_array with (argc, argv, envp) before it
// initialises any library. In ASan and TSan builds the sanitizer's own entry is linked in ahead of
// this one, so it runs first, as it must. The entry reaches every binary only because this object
// is linked in: Runtime's constructor calls use_one_blas_thread().
__attribute__((section(".preinit_array"), used)) void (*choose_blas_kernels_at_start)(int, char**, char**) =
    choose_blas_kernels;

}  // namespace

void use_one_blas_thread() { openblas_set_num_threads(1); }

OneBlasThread::OneBlasThread() : before_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
OneBlasThread::~OneBlasThread() { openblas_set_num_threads(before_); }

void use_all_blas_threads() { openblas_set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))); }

std::string blas_description() {
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  const char* ours = std::getenv("SHARDLAB_CHOSE_CORETYPE");  // children of ours inherit both
  std::string why = ", chosen by OpenBLAS";  // no AVX-512, or the re-exec failed
  if (set && ours && std::strcmp(set, ours) == 0)
    why = ", chosen by shardlab for this AVX-512 CPU";
  else if (set)
    why = std::string(", OPENBLAS_CORETYPE=") + set + " set by the user";
  return std::string(openblas_get_config()) + " (kernels: " + openblas_get_corename() + why + ")";
}

}  // namespace shardlab
