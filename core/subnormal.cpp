#include "core/subnormal.hpp"

#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define SHARDLAB_MXCSR 1
#endif

namespace shardlab {

namespace {

#ifdef SHARDLAB_MXCSR
constexpr unsigned kFtz = 0x8000, kDaz = 0x0040;  // MXCSR bits 15 (flush to zero) and 6 (denormals are zero)
#endif

std::atomic<bool> counting{false};
std::atomic<std::uint64_t> calls{0}, looked{0}, found{0};

// Read as bits: under DAZ a subnormal compares equal to zero, so no comparison may decide.
// A nonzero value whose biased exponent is below `min_exponent` (1 for the type's own range).
std::size_t count_below(const float* p, std::size_t n) {
  std::size_t k = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t u;
    std::memcpy(&u, p + i, sizeof u);
    k += (u & 0x7fffffffu) != 0 && (u & 0x7f800000u) == 0;
  }
  return k;
}

std::size_t count_below(const double* p, std::size_t n, std::uint64_t min_exponent) {
  std::size_t k = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t u;
    std::memcpy(&u, p + i, sizeof u);
    k += (u & 0x7fffffffffffffffull) != 0 && ((u >> 52) & 0x7ffu) < min_exponent;
  }
  return k;
}

void tally(std::size_t n, std::size_t sub) {
  looked.fetch_add(n, std::memory_order_relaxed);
  found.fetch_add(sub, std::memory_order_relaxed);
}

// Set in the main thread before any library's constructor runs (glibc calls .preinit_array first),
// so every thread started later, OpenBLAS's pool among them, starts with the same MXCSR.
void flush_at_start(int, char**, char**) { flush_subnormals_in_this_thread(); }
__attribute__((section(".preinit_array"), used)) void (*flush_subnormals_at_start)(int, char**, char**) = flush_at_start;

}  // namespace

void flush_subnormals_in_this_thread() {
#ifdef SHARDLAB_MXCSR
  _mm_setcsr(_mm_getcsr() | kFtz | kDaz);
#endif
}

bool subnormals_flushed_in_this_thread() {
#ifdef SHARDLAB_MXCSR
  return (_mm_getcsr() & (kFtz | kDaz)) == (kFtz | kDaz);
#else
  return false;
#endif
}

void start_counting_subnormals() {
  calls = 0;
  looked = 0;
  found = 0;
  counting.store(true);
}

SubnormalTally stop_counting_subnormals() {
  counting.store(false);
  return {calls.load(), looked.load(), found.load()};
}

bool counting_subnormals() { return counting.load(std::memory_order_relaxed); }

std::size_t subnormals_in(const float* p, std::size_t n) { return count_below(p, n); }
std::size_t subnormals_in(const double* p, std::size_t n) { return count_below(p, n, 1); }
std::size_t subnormals_in(const double* p, std::size_t n, DType t) {
  // float32 and bfloat16: 2^-126, a double of biased exponent 1023 - 126.
  return count_below(p, n, t == DType::float64 ? 1 : 1023 - 126);
}

void count_contraction(const float* a, std::size_t na, const float* b, std::size_t nb) {
  calls.fetch_add(1, std::memory_order_relaxed);
  tally(na + nb, subnormals_in(a, na) + subnormals_in(b, nb));
}

void count_contraction(const double* a, std::size_t na, const double* b, std::size_t nb) {
  calls.fetch_add(1, std::memory_order_relaxed);
  tally(na + nb, subnormals_in(a, na) + subnormals_in(b, nb));
}

void count_operand(const double* p, std::size_t n, DType t, bool call) {
  if (call) calls.fetch_add(1, std::memory_order_relaxed);
  tally(n, subnormals_in(p, n, t));
}

}  // namespace shardlab
