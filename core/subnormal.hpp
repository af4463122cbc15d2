// Subnormal numbers and contractions. No subnormal may reach a GEMM: on Intel CPUs each FMA that
// reads one takes a microcode assist (AMD hides the cost, so count them there, do not time them).
// Two layers keep them out:
//   1. the arithmetic itself: every rounding to an element type, every GEMM result and every
//      collective sum turns a value below the type's smallest normal into a zero (core/dtype.hpp).
//      It is deterministic, the same in the sharded run and the unsharded reference, on sim and
//      MPI, whatever the thread's floating-point state: this is what the verifier's bounds and the
//      subnormal test rely on.
//   2. flush-to-zero and denormals-are-zero (MXCSR) set at program start, before any thread exists,
//      so that every thread (sim devices, OpenBLAS's pool, MPI ranks' own) inherits them: they also
//      cover what no code of ours sees, the products and partial sums inside a BLAS kernel.
// Counting: a test turns it on, and every contraction (core/gemm.cpp, the MoE's loops) tallies
// its operands' subnormals; off, a contraction pays one relaxed atomic load.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.hpp"

namespace shardlab {

// x86: sets FTZ and DAZ in this thread's MXCSR (elsewhere: nothing). Programs do it at start.
void flush_subnormals_in_this_thread();
// Whether this thread's MXCSR has both FTZ and DAZ set (false off x86).
bool subnormals_flushed_in_this_thread();

// The tally of the contractions run while counting was on, on every thread of the process.
struct SubnormalTally {
  std::uint64_t contractions = 0;  // calls that reported their operands
  std::uint64_t elements = 0;      // operand elements looked at
  std::uint64_t subnormal = 0;     // of those, subnormal in their element type
};
// Starts counting from zero / stops and returns what was counted.
void start_counting_subnormals();
SubnormalTally stop_counting_subnormals();
bool counting_subnormals();  // cheap: one relaxed atomic load

// Subnormals among n values of float or double (by that type's smallest normal), or of values of
// element type t held as double (0 < |v| < smallest_normal(t)).
std::size_t subnormals_in(const float* p, std::size_t n);
std::size_t subnormals_in(const double* p, std::size_t n);
std::size_t subnormals_in(const double* p, std::size_t n, DType t);
// While counting: one contraction with operands a (na elements) and b (nb), tallied.
void count_contraction(const float* a, std::size_t na, const float* b, std::size_t nb);
void count_contraction(const double* a, std::size_t na, const double* b, std::size_t nb);
// An operand of element type t held as double, tallied into the current counts; `call` counts a
// contraction too (once per contraction, with its first operand).
void count_operand(const double* p, std::size_t n, DType t, bool call);

}  // namespace shardlab
