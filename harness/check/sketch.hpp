// Randomized verification of a matrix product (Freivalds): is C = op(A) op(B) up to rounding?
// Costs O(size * k) instead of the O(M K N) of recomputing the product, so it scales to the
// articles' [4096, 20480] results where the unsharded reference costs as much as the sharded run.
// Plain pointers, no xtensor types: callers hold xt::xarray<float>, xt::xarray<double>, and
// bfloat16 data converted to float.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/check/verify.hpp"

namespace shardlab {

// A row-major matrix of `rows` x `cols` elements at `data`. op(X) is X, or X^T when `transposed`:
// a transposed MatRef{p, 4, 3, true} stands for a [3, 4] matrix.
template <class T>
struct MatRef {
  const T* data;
  std::size_t rows, cols;
  bool transposed = false;
};

// Each matrix is read a block of rows at a time, converted to double into one reused buffer of
// this many doubles (4 MiB); a row longer than that is a block of its own.
constexpr std::size_t sketch_buffer_doubles = std::size_t(1) << 19;

constexpr double float_unit_roundoff = 0x1.0p-24;   // u = eps/2; bfloat16 would be 2^-8
constexpr double double_unit_roundoff = 0x1.0p-53;
// The probability that sketch_product fails an honest C (over the draw of its vectors): its row
// tolerance is Hoeffding's bound at this level where that is below the worst case (sketch.cpp).
// With calibrate_group > 0 the bound holds under the calibration's model (rows of C round like
// the recomputed ones), which is checked on the sampled rows only.
constexpr double kFalseFail = 0x1.0p-30;

// Higham's gamma_n = n u / (1 - n u): a sum of n products computed in precision u, in any order,
// is within gamma_n * sum |a_l b_l| of the exact sum (Accuracy and Stability, Lemma 3.1, eq. 3.5).
// Infinity when n u >= 1 (no bound).
double sum_gamma(std::size_t terms, double unit_roundoff);

// "sketch: 20 random +-1 vectors, false-pass probability <= 2^-20 = 9.5e-07 for any element off
// by more than its row's tolerance (largest 0.0031) plus the check's own rounding (largest 2e-12)"
std::string false_pass_line(std::size_t vectors, double largest_tolerance, double largest_rounding);

// `r` distinct rows of 0..n-1 (all of them when r >= n), every r-subset equally likely, drawn from
// `seed` with mt19937_64 (the same on every platform); sorted.
std::vector<std::size_t> sample_rows(std::size_t n, std::size_t r, std::uint64_t seed);

// "rows: 64 of 4096 recomputed exactly, each element against its own bound; an error in 1/8 of the
// rows is missed with probability <= (7/8)^64 = 0.00019". An error touching k of the n rows is
// missed only if none of the r sampled rows is one of them: C(n-k, r) / C(n, r) <= (1 - k/n)^r.
std::string rows_line(std::size_t sampled, std::size_t rows, std::size_t one_in);

// Exact row sampling: `rows` rows i of op(A) op(B) (sample_rows), each recomputed in double as
// op(A)[i,:] op(B) (the r rows together: one GEMM reading B once) with P = |op(A)[i,:]| |op(B)| beside
// it, and each element compared with its own bound
//   |C_ij - (A B)^_ij| <= ((gamma + g_K) P^_ij / (1 - g_K) + result_gamma |C_ij| + tiny) (1 + 32u),
// g_K = sum_gamma(K, 2^-53): an honest C (within gamma P + result_gamma |C| of the exact product,
// elementwise) always passes, and an element off by more than that plus g_K P_ij / (1 - g_K) (the
// check's own rounding, ~1e-12 relative) fails whenever its row is drawn.
struct RowCheck {
  bool pass = true;
  std::size_t sampled = 0, rows = 0;  // rows recomputed, of op(A) op(B)'s rows
  double max_abs_error = 0, largest_bound = 0, worst_ratio = 0;
  std::string first;  // "first failing sampled element [i, j]: ...; " on FAIL
};
template <class T>
RowCheck check_rows(MatRef<T> c, MatRef<T> a, MatRef<T> b, double gamma, double result_gamma, std::size_t rows,
                    std::uint64_t seed);

// What sketch_product is asked, by name (designated fields, in this order):
//   sketch_product<float>("y", c, a, b, {.gamma = g, .vectors = 20, .seed = s, .rows = 64});
struct SketchOptions {
  // The caller's promise: every element of C within gamma * (|op(A)| |op(B)|)_ij + result_gamma *
  // |C_ij| of the exact product. Negative: Error.
  double gamma = 0, result_gamma = 0;
  std::size_t vectors = 0;  // random +-1 vectors; 0: Error (it would pass anything)
  std::uint64_t seed = 0;   // must not be chosen after seeing C: the bound is over the draw of V
  std::size_t rows = 0;     // > 0: also check_rows with that many rows (a stream derived from seed)
  std::size_t one_in = 8;   // rows_line's fraction of rows whose miss probability it prints
  std::size_t calibrate_group = 0;  // > 0 (float32 only): the calibrated row tolerance, below
};

// Checks c = op(a) op(b) with o.vectors random +-1 vectors drawn from o.seed (see sketch.cpp for
// the derivation). A C within the promise (SketchOptions::gamma) fails with probability <=
// kFalseFail (Hoeffding's part; the worst-case part never). If some element is off by more than its
// row's tolerance (plus the check's own rounding), C passes with probability <= 2^-vectors.
// Verdict: tolerance = largest row tolerance, max_abs_error = largest |(C V - A (B V))_ic|, detail =
// the false-pass line, after the first failing row and vector on FAIL. A C of the wrong shape
// FAILs; A and B whose inner sizes differ, vectors = 0 or a negative gamma (or result_gamma) throw Error.
// rows > 0 adds check_rows with that many rows: the verdict passes only if both parts pass. Its
// max_abs_error and tolerance stay the projections' figures; the detail then adds the first
// failing sampled element (on FAIL) and, after the false-pass line, rows_line with the sampled
// elements' largest error, largest bound and worst error/bound.
//
// calibrate_group > 0 (float32 data only) adds a calibrated row tolerance, much tighter than the
// bounds above where long sums cancel (see sketch.cpp, "Calibration"): the sampled rows are also
// computed in float32 as the plan sums them (calibrate_group partial products over blocks of the
// inner dim, added in float32), their squared rounding per unit of W_i = sum_l op(A)_il^2
// |op(B)_l|^2 measured, and every row allowed kCalibrationMargin times the largest seen; only rows
// that cancel like the sampled ones (|C| row sum over (|op(A)| |op(B)|) row sum within a factor 2
// of the sampled range) get it, the others keep the bounds. The sampled rows of C itself must stay
// within that allowance, or the check FAILs. The premise, that the recomputation rounds like C's
// products, holds for products made with one BLAS thread, as every device makes them (Runtime
// pins it): the recomputation pins one thread too, whatever the caller's BLAS would pick. A C
// computed by a threaded sgemm is outside it (its sums may be ordered otherwise).
template <class T>
Verdict sketch_product(const std::string& name, MatRef<T> c, MatRef<T> a, MatRef<T> b, const SketchOptions& o);

// The calibration's measurements (sketch.cpp): ratio = the largest sum_j E_ij^2 / W_i over the
// sampled rows of the float32 recomputation (rows with W_i = 0 are skipped: their products are 0),
// and c_ratio the same for C's own sampled rows (infinite where W_i = 0 but C's row is not 0).
// calibrate_rows samples its rows from `seed` itself; sketch_product passes it a derived seed.
struct Calibration {
  double ratio = 0, c_ratio = 0;
  std::vector<std::size_t> picked;  // the sampled rows
  std::vector<double> weight;       // W_i for every row of op(A)
};
constexpr double kCalibrationMargin = 4;  // on sum_j E_ij^2: twice the measured spread
template <class T>
Calibration calibrate_rows(MatRef<T> c, MatRef<T> a, MatRef<T> b, std::size_t rows, std::size_t group,
                           std::uint64_t seed);

extern template Verdict sketch_product<float>(const std::string&, MatRef<float>, MatRef<float>, MatRef<float>,
                                              const SketchOptions&);
extern template Verdict sketch_product<double>(const std::string&, MatRef<double>, MatRef<double>,
                                               MatRef<double>, const SketchOptions&);
extern template Calibration calibrate_rows<float>(MatRef<float>, MatRef<float>, MatRef<float>, std::size_t,
                                                  std::size_t, std::uint64_t);
extern template RowCheck check_rows<float>(MatRef<float>, MatRef<float>, MatRef<float>, double, double, std::size_t,
                                           std::uint64_t);
extern template RowCheck check_rows<double>(MatRef<double>, MatRef<double>, MatRef<double>, double, double,
                                            std::size_t, std::uint64_t);

}  // namespace shardlab
