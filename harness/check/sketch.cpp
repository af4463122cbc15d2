// The sketch check of a product C = op(A) op(B) (harness/check/sketch.hpp). One idea in one file,
// over 400 lines: the check's derivation (below, about 80 lines) and the three ways it reads the
// matrices (the projections, the sampled rows recomputed exactly, the float32 calibration) share
// one block reader and one verdict; sketch_product is laid out as its jobs (project, calibrate,
// bound each row, compare, write the detail).
#include "harness/check/sketch.hpp"

#include <algorithm>
#include <array>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <type_traits>
#include <vector>

#include <xtensor-blas/xblas.hpp>
#include <xtensor/xadapt.hpp>

#include "core/blas.hpp"
#include "core/error.hpp"
#include "core/gemm.hpp"
#include "core/text.hpp"
#include "harness/check/sketch_memo.hpp"

// Shapes: op(A) [M, K], op(B) [K, N], C [M, N]; V [N, k] of +-1; E = C - op(A) op(B), exactly.
// The check computes in double (u = 2^-53, gamma_n = n u / (1 - n u)), one read of each matrix:
//   W = op(B) V  [K, k]    w = |op(B)| 1  [K]
//   Y = op(A) W  [M, k]    s = |op(A)| w  [M]    s_i = sum_j (|op(A)| |op(B)|)_ij
//   Z = C V      [M, k]    r = |C| 1      [M]
// and passes iff |Z_ic - Y_ic| <= T_i for every row i and vector c.
//
// An honest C passes. If |E_ij| <= gamma (|op(A)| |op(B)|)_ij + rho |C_ij| for all j (rho =
// result_gamma: a last rounding relative to the result, as bfloat16 has), the exact sketch
// (E V)_ic = sum_j E_ij v_jc is at most sum_j (gamma P_ij + rho |C_ij|) |v_jc| = t_i = gamma s_i + rho r_i:
// each element's own allowance applied to |v|, summed along the row. The computed Z - Y differs from it by
// the check's rounding; a sum of n products in double is within gamma_n sum |terms| in any
// order (Higham, Accuracy and Stability, eq. 3.5); float -> double and times +-1 are exact:
//   Z:  gamma_N r_i
//   W:  |dW| <= gamma_N w, adding |op(A)| |dW| <= gamma_N s_i to Y;  |W^| <= (1 + gamma_N) w
//   Y:  gamma_K |op(A)| |W^| <= gamma_K (1 + gamma_N) s_i
// so e_i <= gamma_N r_i + (gamma_N + gamma_K + gamma_K gamma_N) s_i <= delta (r_i + s_i) with
// delta = gamma_{N+K} (Higham Lemma 3.3). r and s are computed sums of nonnegative terms, so
// r <= r^ / (1 - delta) and s <= s^ / (1 - delta). Hence
//   T_i = (((gamma + delta) s^_i + (rho + delta) r^_i) / (1 - delta) + tiny) (1 + 32u)  >=  t_i + e_i,
// where tiny = (N + K) 2^-1022 covers products that underflow in the check (flushed to zero, not
// gradual: core/subnormal.hpp), plus N (3K + 1) L for C's own flushes (core/dtype.hpp: each of its
// K products, K - 1 + G - 1 adds and stores, G <= K devices, may lose up to L, T's smallest normal,
// outside the relative bounds gamma and rho), and (1 + 32u) makes the computed
// T_i an upper bound despite its own few roundings ((1 - u)^30 (1 + 32u) > 1).
//
// A wrong C fails with probability >= 1 - 2^-k. The final subtraction rounds by at most
// u |Z - Y|, so a pass means the exact (E V)_ic is within T_i + f_i, f_i = e_i + 2u T_i. Suppose
// |E_ij| > T_i + f_i. Fix every entry of vector c but v_jc: its two signs give exact sketch
// values 2|E_ij| apart, so at most one of them is within T_i + f_i. Vector c passes row i with
// probability <= 1/2, independently of the other vectors; all k pass with probability <= 2^-k.
// The detail line reports the largest T_i as the row's tolerance and the largest f_i as the
// check's own rounding.
//
// A tighter row tolerance, with a stated false-FAIL probability. T_i above assumes every E_ij at
// its bound b_ij = gamma P_ij + rho |C_ij| with the sign of v_jc: sum_j b_ij, growing with N. But V is
// drawn after C is fixed (from a seed not chosen by looking at C), so sum_j E_ij v_jc is a sum of
// independent, mean-zero terms in [-b_ij, b_ij], and Hoeffding's inequality gives
//     P(|sum_j E_ij v_jc| >= t) <= 2 exp(-t^2 / (2 sum_j b_ij^2)),
// with sum_j b_ij^2 <= (max_j b_ij) (sum_j b_ij) <= (gamma pm_i + rho cm_i) (gamma s_i + rho r_i) = q_i,
// pm_i = |op(A)_i| colmax(|op(B)|) >= max_j P_ij and cm_i = max_j |C_ij| (both computed in double,
// within delta of exact, as s and r are). Over all M rows and k vectors an honest C then fails
// with probability <= kFalseFail when
//     h_i = sqrt(2 q_i ln(2 M k / kFalseFail)),
// about sqrt(N) / 8 times below t_i at the articles' sizes. The row tolerance is the smaller of the
// two, T_i = min(T_i(worst case), (h_i / (1 - delta) + delta (r_i + s_i) / (1 - delta) + tiny) (1 + 32u)),
// and the catching argument above holds for any T_i. Power (verify.hpp): an element off by more
// than T_i + f_i is caught with probability >= 1 - 2^-k, so the check reports max_i (T_i + f_i)
// over the RMS of C. The bound is per row: an error spread over a row must exceed the sum
// of that row's elementwise allowances to be caught (test_sketch.cpp shows one that is not).
// That is why sketch_product can add exact row sampling (check_rows, sketch.hpp): a few rows
// recomputed in double and compared element by element, which sees a block-shaped error (a missing
// reduction, a stale block) that the per-row tolerance hides, if one of its rows is drawn.
//
// Calibration (float32). Both bounds above take every rounding at its worst: for a sum of K
// products that is K u |a||b| per element, where the real error of a blocked float32 GEMM is near
// u sqrt(K) |C| (cancellation: |a||b| summed is ~sqrt(K) times |C|), so at the articles' sizes
// the row tolerance is tens of times C's RMS. Hoeffding needs only sum_j E_ij^2, and that can be
// measured: the sampled rows are recomputed in float32 as the plan sums them (the inner dim cut
// into `group` blocks, each block's product by sgemm, the partial sums added in float32) and in
// double, and kappa = max over them of sum_j (float32 - double)^2 / W_i, with W_i = sum_l
// op(A)_il^2 |op(B)_l|^2 (a row's rounding scales with it where its sums cancel; rows with
// W_i = 0 are skipped). Every row i whose cancellation r_i / s_i lies within a factor 2 of the
// sampled rows' range is then allowed S_i = kCalibrationMargin kappa W_i, and
// h_i = sqrt(2 S_i ln(2 M k / kFalseFail)) in place of q_i; a row that cancels less (its partial
// sums grow like K, not sqrt(K), and round more per unit of W_i) keeps the bounds, and so does
// every row when kappa is 0 (the sampled rows recomputed exactly: nothing was measured). This is a model, not a bound: it assumes C's rows round like the recomputed ones (the same
// kernels on the same inputs, sums split the same way), within a factor kCalibrationMargin on
// sum_j E_ij^2 (2x in size; with N terms a row's sum varies by ~sqrt(2/N) between rows). The
// model is checked where it can be: C's own sampled rows must have sum_j E_ij^2 <= S_i, or the
// check FAILs; that also catches a small error spread over many elements of those rows. The
// catching argument and the power are as above, with the smaller T_i.

namespace shardlab {

namespace {

// What flushes to zero can cost one element of a C of K-term sums held as T: (3K + 1) L (the
// header's derivation).
template <class T>
double flushes(std::size_t inner) {
  const double smallest = std::is_same_v<T, double> ? DBL_MIN : double(FLT_MIN);
  return (3 * static_cast<double>(inner) + 1) * smallest;
}

using Matrix = std::array<std::size_t, 2>;
using Vector = std::array<std::size_t, 1>;

// dst = src as double, then |dst|: fixed-length inner loops, which GCC vectorizes at -O2.
template <class T>
void to_double(const T* src, double* dst, std::size_t n) {
  std::size_t e = 0;
  for (; e + 8 <= n; e += 8)
    for (std::size_t q = 0; q < 8; ++q) dst[e + q] = static_cast<double>(src[e + q]);
  for (; e < n; ++e) dst[e] = static_cast<double>(src[e]);
}
void absolute(double* x, std::size_t n) {
  std::size_t e = 0;
  for (; e + 8 <= n; e += 8)
    for (std::size_t q = 0; q < 8; ++q) x[e + q] = std::fabs(x[e + q]);
  for (; e < n; ++e) x[e] = std::fabs(x[e]);
}

std::string dims(std::size_t rows, std::size_t cols) { return shape_text(Shape{rows, cols}); }
template <class T> std::size_t op_rows(MatRef<T> x) { return x.transposed ? x.cols : x.rows; }
template <class T> std::size_t op_cols(MatRef<T> x) { return x.transposed ? x.rows : x.cols; }

// out [op_rows, k] = op(X) in [op_cols, k]  and  out_abs [op_rows, k_abs] = |op(X)| in_abs [op_cols, k_abs].
// X is read once, a block of storage rows at a time converted to double in `buf`. Not
// transposed, a block gives rows of the results; transposed, every block adds to all of them.
template <class T>
void apply(MatRef<T> x, const double* in, std::size_t k, const double* in_abs, double* out,
           double* out_abs, std::vector<double>& buf, std::size_t k_abs = 1) {
  const std::size_t cols = x.cols, out_rows = op_rows(x);
  std::fill(out, out + out_rows * k, 0.0);
  std::fill(out_abs, out_abs + out_rows * k_abs, 0.0);
  if (x.rows == 0 || cols == 0) return;
  const std::size_t step = std::max<std::size_t>(1, sketch_buffer_doubles / cols);
  buf.resize(std::min(step, x.rows) * cols);
  for (std::size_t r0 = 0; r0 < x.rows; r0 += step) {
    const std::size_t n = std::min(step, x.rows - r0), size = n * cols;
    to_double(x.data + r0 * cols, buf.data(), size);
    auto blk = xt::adapt(buf.data(), size, xt::no_ownership(), Matrix{n, cols});
    if (!x.transposed) {  // out[r0:r0+n] = blk [n, cols] in [cols, k]
      auto vin = xt::adapt(in, cols * k, xt::no_ownership(), Matrix{cols, k});
      auto vout = xt::adapt(out + r0 * k, n * k, xt::no_ownership(), Matrix{n, k});
      xt::blas::gemm(blk, vin, vout);
    } else {  // out [cols, k] += blk^T [cols, n] in[r0:r0+n] [n, k]
      auto vin = xt::adapt(in + r0 * k, n * k, xt::no_ownership(), Matrix{n, k});
      auto vout = xt::adapt(out, cols * k, xt::no_ownership(), Matrix{cols, k});
      xt::blas::gemm(blk, vin, vout, true, false, 1.0, 1.0);
    }
    absolute(buf.data(), size);
    if (k_abs > 1 && !x.transposed) {
      auto vin = xt::adapt(in_abs, cols * k_abs, xt::no_ownership(), Matrix{cols, k_abs});
      auto vout = xt::adapt(out_abs + r0 * k_abs, n * k_abs, xt::no_ownership(), Matrix{n, k_abs});
      xt::blas::gemm(blk, vin, vout);
    } else if (k_abs > 1) {
      auto vin = xt::adapt(in_abs + r0 * k_abs, n * k_abs, xt::no_ownership(), Matrix{n, k_abs});
      auto vout = xt::adapt(out_abs, cols * k_abs, xt::no_ownership(), Matrix{cols, k_abs});
      xt::blas::gemm(blk, vin, vout, true, false, 1.0, 1.0);
    } else if (!x.transposed) {
      auto vin = xt::adapt(in_abs, cols, xt::no_ownership(), Vector{cols});
      auto vout = xt::adapt(out_abs + r0, n, xt::no_ownership(), Vector{n});
      xt::blas::gemv(blk, vin, vout);
    } else {
      auto vin = xt::adapt(in_abs + r0, n, xt::no_ownership(), Vector{n});
      auto vout = xt::adapt(out_abs, cols, xt::no_ownership(), Vector{cols});
      xt::blas::gemv(blk, vin, vout, true, 1.0, 1.0);
    }
  }
}

// out[i] = max_j |op(X)_ij| for each of op(X)'s rows; returns the sum of squares of every element.
template <class T>
double row_max_abs(MatRef<T> x, double* out) {
  std::fill(out, out + op_rows(x), 0.0);
  double squares = 0;
  for (std::size_t r = 0; r < x.rows; ++r) {
    const T* row = x.data + r * x.cols;
    double big = 0;
    for (std::size_t c = 0; c < x.cols; ++c) {
      const double e = std::fabs(static_cast<double>(row[c]));
      squares += e * e;
      if (x.transposed) out[c] = std::max(out[c], e);
      else big = std::max(big, e);
    }
    if (!x.transposed) out[r] = big;
  }
  return squares;
}

// V [n, k], row-major. Vector c takes bits c*n .. c*n+n-1 of the mt19937_64 stream, lowest bit
// of each word first (0 -> +1, 1 -> -1): the same on every platform, and the same whatever k.
std::vector<double> rademacher(std::size_t n, std::size_t k, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> v(n * k);
  std::uint64_t word = 0;
  std::size_t bits = 0;
  for (std::size_t c = 0; c < k; ++c)
    for (std::size_t j = 0; j < n; ++j) {
      if (bits == 0) word = rng(), bits = 64;
      v[j * k + c] = (word & 1) ? -1.0 : 1.0;
      word >>= 1, --bits;
    }
  return v;
}

std::string g3(double x) { return format_number(x, "%.3g"); }

// A uniform integer in [0, bound), bound > 0: rejection keeps it exactly uniform (no modulo bias).
std::uint64_t below(std::mt19937_64& rng, std::uint64_t bound) {
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % bound;  // a whole number of bounds
  std::uint64_t x;
  while ((x = rng()) >= limit) {
  }
  return x % bound;
}

template <class T>
double at(MatRef<T> x, std::size_t i, std::size_t j) {  // op(X)_ij as double
  return static_cast<double>(x.transposed ? x.data[j * x.cols + i] : x.data[i * x.cols + j]);
}

// The row sampler's seed: its own stream, so the rows drawn do not depend on the vectors' bits.
std::uint64_t rows_seed(std::uint64_t seed) { return seed * 6364136223846793005ULL + 1442695040888963407ULL; }

// Rows `picked` of op(A) op(B) in double, exact [n, r] (column q is row picked[q]), and
// |op(A)| |op(B)| beside them in p: B read once with its transposition flipped, as apply reads it.
template <class T>
void exact_rows(MatRef<T> a, MatRef<T> b, const std::vector<std::size_t>& picked, std::vector<double>& exact,
                std::vector<double>& p) {
  const std::size_t inner = op_cols(a), n = op_cols(b), r = picked.size();
  // R^T [inner, r]: column q is row picked[q] of op(A), in double, and |R^T| beside it.
  std::vector<double> rt(inner * r), rt_abs(inner * r), buf;
  for (std::size_t l = 0; l < inner; ++l)
    for (std::size_t q = 0; q < r; ++q) {
      rt[l * r + q] = at(a, picked[q], l);
      rt_abs[l * r + q] = std::fabs(rt[l * r + q]);
    }
  exact.assign(n * r, 0.0);
  p.assign(n * r, 0.0);
  apply(MatRef<T>{b.data, b.rows, b.cols, !b.transposed}, rt.data(), r, rt_abs.data(), exact.data(), p.data(), buf, r);
}

// W_i = sum_l op(A)_il^2 |op(B)_l|^2 for every row i of op(A): the scale of row i's rounding
// (each term a_il b_lj enters sum_j E_ij^2 through its own size squared).
template <class T>
std::vector<double> row_weights(MatRef<T> a, MatRef<T> b) {
  const std::size_t inner = op_cols(a), m = op_rows(a);
  std::vector<double> w2(inner, 0.0), out(m, 0.0);
  for (std::size_t r = 0; r < b.rows; ++r)
    for (std::size_t col = 0; col < b.cols; ++col) {
      const double e = static_cast<double>(b.data[r * b.cols + col]);
      w2[b.transposed ? col : r] += e * e;
    }
  for (std::size_t r = 0; r < a.rows; ++r)
    for (std::size_t col = 0; col < a.cols; ++col) {
      const double e = static_cast<double>(a.data[r * a.cols + col]);
      if (a.transposed) out[col] += e * e * w2[r];  // op(A)_{col, r}
      else out[r] += e * e * w2[col];
    }
  return out;
}

}  // namespace

std::vector<std::size_t> sample_rows(std::size_t n, std::size_t r, std::uint64_t seed) {
  r = std::min(r, n);
  // Floyd's algorithm: after step j the chosen set is a uniform r-subset of 0..j.
  std::vector<char> chosen(n, 0);
  std::mt19937_64 rng(seed);
  for (std::size_t j = n - r; j < n; ++j) {
    const std::size_t t = static_cast<std::size_t>(below(rng, j + 1));
    chosen[chosen[t] ? j : t] = 1;
  }
  std::vector<std::size_t> out;
  out.reserve(r);
  for (std::size_t i = 0; i < n; ++i)
    if (chosen[i]) out.push_back(i);
  return out;
}

std::string rows_line(std::size_t sampled, std::size_t rows, std::size_t one_in) {
  std::string s = "rows: " + std::to_string(sampled) + " of " + std::to_string(rows) +
                  " recomputed exactly, each element against its own bound; ";
  if (sampled >= rows) return s + "every row is checked, so no error is missed";
  if (one_in <= 1) return s + "an error in every row is never missed";
  const std::string f = std::to_string(one_in), g = std::to_string(one_in - 1), r = std::to_string(sampled);
  const double p = std::pow(1.0 - 1.0 / static_cast<double>(one_in), static_cast<double>(sampled));
  return s + "an error in 1/" + f + " of the rows is missed with probability <= (" + g + "/" + f + ")^" + r + " = " +
         format_number(p, "%.2g");
}

namespace {

// The sampled rows of op(A) op(B), recomputed once for the row check and the calibration.
struct SampledRows {
  std::vector<std::size_t> picked;
  std::vector<double> exact, p;  // [n, r] as exact_rows gives them
};
template <class T>
SampledRows sampled_rows(MatRef<T> a, MatRef<T> b, std::size_t rows, std::uint64_t seed) {
  SampledRows s;
  s.picked = sample_rows(op_rows(a), rows, seed);
  if (!s.picked.empty() && op_cols(b) > 0) exact_rows(a, b, s.picked, s.exact, s.p);
  return s;
}

template <class T>
RowCheck check_sampled(MatRef<T> c, std::size_t inner, double gamma, double result_gamma, const SampledRows& rows) {
  const std::size_t n = op_cols(c), r = rows.picked.size();
  const std::vector<std::size_t>& picked = rows.picked;
  const std::vector<double>&exact = rows.exact, &p = rows.p;
  RowCheck out;
  out.rows = op_rows(c);
  out.sampled = r;
  if (r == 0 || n == 0) return out;
  // The computed row is within gk P of the exact one (a double sum of `inner` products, any order),
  // and P^ >= (1 - gk) P: see the header for the tolerance.
  const double u = double_unit_roundoff, gk = sum_gamma(inner, u), up = 1 + 32 * u;
  const double tiny = static_cast<double>(inner + 1) * DBL_MIN + flushes<T>(inner);
  for (std::size_t q = 0; q < r; ++q)
    for (std::size_t j = 0; j < n; ++j) {
      const double cij = at(c, picked[q], j), want = exact[j * r + q];
      const double tol = ((gamma + gk) * p[j * r + q] / (1 - gk) + result_gamma * std::fabs(cij) + tiny) * up;
      const double diff = cij - want, err = std::isnan(diff) ? INFINITY : std::fabs(diff);
      out.max_abs_error = std::max(out.max_abs_error, err);
      out.largest_bound = std::max(out.largest_bound, tol);
      out.worst_ratio = std::max(out.worst_ratio, err / tol);  // tol > 0: tiny
      if (!(err <= tol) && out.pass) {
        out.pass = false;
        out.first = "first failing sampled element [" + std::to_string(picked[q]) + ", " + std::to_string(j) +
                    "]: |C_ij - (A B)_ij| = " + g3(err) + " > its bound " + g3(tol) + "; ";
      }
    }
  return out;
}

// The calibration's reference side: W_i for every row and the largest sum_j E_ij^2 / W_i of the
// sampled rows recomputed in float32 as the plan sums them (C is not read).
template <class T>
Calibration calibrate_reference(MatRef<T> a, MatRef<T> b, std::size_t group, const SampledRows& rows) {
  static_assert(std::is_same_v<T, float>, "calibration recomputes rows in float32");
  const std::size_t inner = op_cols(a), n = op_cols(b), r = rows.picked.size();
  const std::vector<std::size_t>& picked = rows.picked;
  const std::vector<double>& exact = rows.exact;
  Calibration out;
  if (r == 0 || n == 0 || inner == 0) return out;
  const std::vector<double> weight = row_weights(a, b);
  // The float32 rows as the plan sums them: `group` blocks of the inner dim (ceil(inner/group),
  // the last shorter), each a [r, kb] x [kb, n] sgemm, added in float32 in order.
  const std::size_t g = std::max<std::size_t>(1, std::min(group, inner)), q = (inner + g - 1) / g;
  std::vector<float> sum(r * n, 0.0f), part(r * n), ablk, bblk;
  for (std::size_t k0 = 0; k0 < inner; k0 += q) {
    const std::size_t kb = std::min(q, inner - k0);
    ablk.resize(r * kb);
    for (std::size_t i = 0; i < r; ++i)
      for (std::size_t l = 0; l < kb; ++l) ablk[i * kb + l] = static_cast<float>(at(a, picked[i], k0 + l));
    const float* bp = b.data + k0 * n;  // op(B) rows k0.. stored contiguously when B is not transposed
    if (b.transposed) {
      bblk.resize(kb * n);
      for (std::size_t l = 0; l < kb; ++l)
        for (std::size_t j = 0; j < n; ++j) bblk[l * n + j] = b.data[j * b.cols + k0 + l];
      bp = bblk.data();
    }
    {
      // As the devices computed their products: one BLAS thread (a threaded sgemm may round otherwise).
      const OneBlasThread one;
      batched_gemm(1, r, n, kb, ablk.data(), false, bp, false, part.data());
    }
    for (std::size_t e = 0; e < r * n; ++e) sum[e] = k0 == 0 ? part[e] : sum[e] + part[e];
  }
  for (std::size_t i = 0; i < r; ++i) {
    double ref = 0;
    for (std::size_t j = 0; j < n; ++j) {
      const double dr = static_cast<double>(sum[i * n + j]) - exact[j * r + i];
      ref += dr * dr;
    }
    const double w = weight[picked[i]];
    if (w > 0) out.ratio = std::max(out.ratio, ref / w);
  }
  out.picked = picked;
  out.weight = weight;
  return out;
}

// `reference` with C's side added: the largest sum_j E_ij^2 / W_i of C's own sampled rows.
template <class T>
Calibration calibrate_result(MatRef<T> c, Calibration reference, const SampledRows& rows) {
  const std::size_t n = op_cols(c), r = reference.picked.size();
  for (std::size_t i = 0; i < r; ++i) {
    double own = 0;
    for (std::size_t j = 0; j < n; ++j) {
      const double dc = at(c, reference.picked[i], j) - rows.exact[j * r + i];
      own += dc * dc;
    }
    const double w = reference.weight[reference.picked[i]];
    reference.c_ratio = std::max(reference.c_ratio, w > 0 ? own / w : own > 0 ? INFINITY : 0.0);
    if (std::isnan(own)) reference.c_ratio = INFINITY;
  }
  return reference;
}

template <class T>
Calibration calibrate_sampled(MatRef<T> c, MatRef<T> a, MatRef<T> b, std::size_t group, const SampledRows& rows) {
  return calibrate_result(c, calibrate_reference(a, b, group, rows), rows);
}

void fit(std::size_t m, std::size_t inner, std::size_t n, std::size_t b_rows, std::size_t c_rows, std::size_t c_cols,
         const char* what) {
  if (b_rows != inner || c_rows != m || c_cols != n)
    throw Error(ErrorKind::rank_mismatch, std::string(what) + ": C is " + dims(c_rows, c_cols) + ", op(A) " +
                                              dims(m, inner) + " and op(B) " + dims(b_rows, n) + "; they do not fit");
}

}  // namespace

template <class T>
RowCheck check_rows(MatRef<T> c, MatRef<T> a, MatRef<T> b, double gamma, double result_gamma, std::size_t rows,
                    std::uint64_t seed) {
  fit(op_rows(a), op_cols(a), op_cols(b), op_rows(b), op_rows(c), op_cols(c), "row check");
  return check_sampled(c, op_cols(a), gamma, result_gamma, sampled_rows(a, b, rows, seed));
}

template <class T>
Calibration calibrate_rows(MatRef<T> c, MatRef<T> a, MatRef<T> b, std::size_t rows, std::size_t group,
                           std::uint64_t seed) {
  fit(op_rows(a), op_cols(a), op_cols(b), op_rows(b), op_rows(c), op_cols(c), "calibration");
  return calibrate_sampled(c, a, b, group, sampled_rows(a, b, rows, seed));
}

double sum_gamma(std::size_t terms, double unit_roundoff) {
  const double nu = static_cast<double>(terms) * unit_roundoff;
  return nu >= 1 ? INFINITY : nu / (1 - nu);
}

std::string false_pass_line(std::size_t vectors, double largest_tolerance, double largest_rounding) {
  const double p = std::ldexp(1.0, -static_cast<int>(std::min<std::size_t>(vectors, 100000)));
  const std::string k = std::to_string(vectors);
  return "sketch: " + k + " random +-1 vector" + (vectors == 1 ? "" : "s") +
         ", false-pass probability <= 2^-" + k + (p > 0 ? " = " + format_number(p, "%.2g") : "") +
         " for any element off by more than its row's tolerance (largest " + g3(largest_tolerance) +
         ") plus the check's own rounding (largest " + g3(largest_rounding) + ")";
}

namespace {

// What a check computes from op(A), op(B) and its options alone, C unread: the part a SketchReuse
// keeps for a later check of the same operands (sketch_memo.hpp).
struct Reference {
  std::vector<double> y, sp;  // [M, k]: A (B V); [M, 2]: s_i = sum_j P_ij and pm_i >= max_j P_ij
  SampledRows sampled;        // the rows recomputed in double (none when neither part asks)
  Calibration cal;            // calibrate_reference's, with a group (float32 only)
  std::size_t bytes() const {
    return (y.size() + sp.size() + sampled.exact.size() + sampled.p.size() + cal.weight.size()) * sizeof(double) +
           (sampled.picked.size() + cal.picked.size()) * sizeof(std::size_t);
  }
};

template <class T>
Reference reference_side(MatRef<T> a, MatRef<T> b, const std::vector<double>& rv, std::size_t k, std::size_t rows,
                         std::uint64_t seed, std::size_t group) {
  const std::size_t m = op_rows(a), inner = op_cols(a), n = op_cols(b);
  Reference ref;
  ref.y.resize(m * k), ref.sp.resize(m * 2);
  std::vector<double> buf, w(inner * k), w_abs(inner), ones(n, 1.0);
  apply(b, rv.data(), k, ones.data(), w.data(), w_abs.data(), buf);
  // |op(A)| [w_abs, colmax |op(B)|] = [s, pm]: each row's sum_j P_ij and a bound on its max_j P_ij.
  std::vector<double> colmax(inner), abs_in(inner * 2);
  row_max_abs(b, colmax.data());
  for (std::size_t l = 0; l < inner; ++l) abs_in[2 * l] = w_abs[l], abs_in[2 * l + 1] = colmax[l];
  apply(a, w.data(), k, abs_in.data(), ref.y.data(), ref.sp.data(), buf, 2);
  // Rows recomputed in double once, for the row check and the calibration.
  if (rows > 0) ref.sampled = sampled_rows(a, b, rows, seed);
  if constexpr (std::is_same_v<T, float>)
    if (group > 0) ref.cal = calibrate_reference(a, b, group, ref.sampled);
  return ref;
}

// reference_side, or the one a live SketchReuse kept for the same operands and options: V drawn
// from `seed` (rv), the rows from rows_seed(seed).
template <class T>
std::shared_ptr<const Reference> reference_of(MatRef<T> a, MatRef<T> b, const std::vector<double>& rv, std::size_t k,
                                              std::uint64_t seed, std::size_t rows, std::size_t group) {
  std::string key;
  if (sketch_memo::active()) {
    const auto side = [](MatRef<T> x) {
      return std::to_string(x.rows) + "x" + std::to_string(x.cols) + (x.transposed ? "T " : " ") +
             fingerprint(x.data, x.rows * x.cols * sizeof(T));
    };
    key = std::string(std::is_same_v<T, float> ? "float32" : "float64") + " A " + side(a) + " B " + side(b) +
          " vectors " + std::to_string(k) + " seed " + std::to_string(seed) + " rows " + std::to_string(rows) +
          " group " + std::to_string(group);
    if (auto kept = sketch_memo::find(key)) return std::static_pointer_cast<const Reference>(kept);
  }
  auto ref = std::make_shared<const Reference>(reference_side(a, b, rv, k, rows, rows_seed(seed), group));
  if (!key.empty()) sketch_memo::keep(key, ref, ref->bytes());
  return ref;
}

// The three projections of the sketch and the row figures the bounds need, for k vectors V: the
// reference's A (B V) and row sums beside C's own.
struct Projections {
  std::vector<double> z;      // [M, k]: C V
  const std::vector<double>& y;   // [M, k]: A (B V)
  const std::vector<double>& sp;  // [M, 2]: s_i and pm_i
  std::vector<double> r, cm;  // [M]: row sums of |C| and row max of |C|
  double squares = 0;         // sum of C_ij^2
};

template <class T>
Projections project(MatRef<T> c, const Reference& ref, const std::vector<double>& rv, std::size_t k) {
  const std::size_t m = op_rows(c), n = op_cols(c);
  Projections p{{}, ref.y, ref.sp, {}, {}, 0};
  p.z.resize(m * k), p.r.resize(m), p.cm.resize(m);
  std::vector<double> buf, ones(n, 1.0);
  apply(c, rv.data(), k, ones.data(), p.z.data(), p.r.data(), buf);
  p.squares = row_max_abs(c, p.cm.data());
  return p;
}

// The calibration (float32 with a group only) and the range of cancellation |C| row sum /
// (|op(A)| |op(B)|) row sum its sampled rows span: rows outside twice that range keep the bounds.
struct Calibrated {
  Calibration cal;
  bool on = false;
  double cancel_lo = INFINITY, cancel_hi = 0;
};

template <class T>
Calibrated calibrate(MatRef<T> c, const Reference& ref, bool calibrating, const Projections& p) {
  Calibrated out;
  if (calibrating) out.cal = calibrate_result(c, ref.cal, ref.sampled);
  out.on = !out.cal.weight.empty() && !out.cal.picked.empty() && out.cal.ratio > 0;
  for (std::size_t i : out.cal.picked)
    if (p.sp[2 * i] > 0) {
      out.cancel_lo = std::min(out.cancel_lo, p.r[i] / p.sp[2 * i]);
      out.cancel_hi = std::max(out.cancel_hi, p.r[i] / p.sp[2 * i]);
    }
  return out;
}

// The constants of every row's bound (the header's derivation): delta = gamma_{N+K} in double,
// up = 1 + 32u, tiny for flushes, spread = 2 ln(2 M k / kFalseFail) for Hoeffding.
struct BoundTerms {
  double gamma, result_gamma, u, delta, up, tiny, spread;
};

// Row i's tolerance T_i (the smaller of the worst case, Hoeffding's and, where the row cancels like
// the sampled ones, the calibrated one) and the check's own rounding f_i beside it.
struct RowBound {
  double tol = 0, own = 0;
  bool uncalibrated = false;  // calibrating, but this row cancels unlike the sampled rows
};

RowBound row_bound(const Projections& p, std::size_t i, const BoundTerms& t, const Calibrated& cal) {
  const double s_i = p.sp[2 * i], pm_i = p.sp[2 * i + 1], r_i = p.r[i], d = t.delta;
  const double worst = (((t.gamma + d) * s_i + (t.result_gamma + d) * r_i) / (1 - d) + t.tiny) * t.up;
  const double q = (t.gamma * pm_i + t.result_gamma * p.cm[i]) * (t.gamma * s_i + t.result_gamma * r_i);
  const double likely = ((std::sqrt(t.spread * q) + d * (r_i + s_i)) / (1 - d) + t.tiny) * t.up;
  RowBound out;
  out.tol = std::min(worst, likely);
  if (cal.on) {
    const double cancel = s_i > 0 ? r_i / s_i : 0.0;
    if (s_i > 0 && cancel >= cal.cancel_lo / 2 && cancel <= 2 * cal.cancel_hi) {
      const double si = kCalibrationMargin * cal.cal.ratio * cal.cal.weight[i];
      out.tol = std::min(out.tol, ((std::sqrt(t.spread * si) + d * (r_i + s_i)) / (1 - d) + t.tiny) * t.up);
    } else if (s_i > 0) {
      out.uncalibrated = true;
    }
  }
  out.own = ((d * (r_i + s_i) / (1 - d) + 2 * t.u * out.tol) + t.tiny) * t.up;
  return out;
}

// "; calibrated on 64 rows recomputed in float32 (...)", or "" without a calibration.
std::string calibration_clause(const Calibrated& c, std::size_t uncalibrated) {
  if (!c.on) return "";
  const double seen = c.cal.c_ratio / c.cal.ratio;
  return "; calibrated on " + std::to_string(c.cal.picked.size()) + " rows recomputed in float32 (sum_j E_ij^2 <= " +
         g3(c.cal.ratio) + " W_i there; rows allowed " + g3(kCalibrationMargin) + "x that; C's sampled rows " +
         g3(seen) + "x" +
         (uncalibrated ? "; " + std::to_string(uncalibrated) + " rows cancel unlike the sampled ones and keep the bounds"
                       : "") +
         ")";
}

// Throws for operands that do not fit, no vectors or a negative gamma. True when C has op(A) op(B)'s
// shape; else false, with `v` the FAIL verdict of a C of the wrong shape.
template <class T>
bool c_fits(const std::string& name, MatRef<T> c, MatRef<T> a, MatRef<T> b, const SketchOptions& o, Verdict& v) {
  const std::size_t m = op_rows(a), inner = op_cols(a), n = op_cols(b);
  if (op_rows(b) != inner)
    throw Error(ErrorKind::rank_mismatch, "sketch of " + name + ": op(A) is " + dims(m, inner) + " but op(B) is " +
                                              dims(op_rows(b), n) + "; the inner sizes must match");
  if (o.vectors == 0)
    throw Error(ErrorKind::unsupported, "sketch of " + name + " needs at least one random vector; 0 would pass anything");
  if (!(o.gamma >= 0) || !(o.result_gamma >= 0))
    throw Error(ErrorKind::unsupported, "sketch of " + name + ": gamma must be >= 0, got " + g3(o.gamma) +
                                            (o.result_gamma == 0 ? "" : " and " + g3(o.result_gamma)));
  v.name = name;
  if (op_rows(c) == m && op_cols(c) == n) return true;
  v.pass = false;
  v.max_abs_error = INFINITY;
  v.detail = name + " is " + dims(op_rows(c), op_cols(c)) + ", expected " + dims(m, n) + " = op(A) op(B)";
  return false;
}

}  // namespace

template <class T>
Verdict sketch_product(const std::string& name, MatRef<T> c, MatRef<T> a, MatRef<T> b, const SketchOptions& o) {
  Verdict v;
  if (!c_fits(name, c, a, b, o, v)) return v;
  const std::size_t m = op_rows(a), inner = op_cols(a), n = op_cols(b), k = o.vectors;
  const std::vector<double> rv = rademacher(n, k, o.seed);
  // Rows recomputed in double once, for the row check and the calibration (64 if only it asks).
  const bool calibrating = std::is_same_v<T, float> && o.calibrate_group > 0;
  const std::size_t rows = o.rows > 0 ? o.rows : calibrating ? 64 : 0;
  const std::shared_ptr<const Reference> ref =
      reference_of(a, b, rv, k, o.seed, rows, calibrating ? o.calibrate_group : 0);
  const Projections p = project(c, *ref, rv, k);
  const Calibrated cal = calibrate(c, *ref, calibrating, p);

  const double u = double_unit_roundoff, delta = sum_gamma(n + inner, u);
  const BoundTerms terms{o.gamma, o.result_gamma, u, delta, 1 + 32 * u,
                         static_cast<double>(n + inner) * DBL_MIN + static_cast<double>(n) * flushes<T>(inner),
                         2 * std::log(2.0 * static_cast<double>(m) * static_cast<double>(k) / kFalseFail)};
  double largest_own = 0, guaranteed = 0;
  std::size_t uncalibrated = 0;
  std::vector<double> rel;  // T_i over row i's mean |C_ij|
  std::string first;
  for (std::size_t i = 0; i < m; ++i) {
    const RowBound rb = row_bound(p, i, terms, cal);
    uncalibrated += rb.uncalibrated;
    v.tolerance = std::max(v.tolerance, rb.tol);
    largest_own = std::max(largest_own, rb.own);
    guaranteed = std::max(guaranteed, rb.tol + rb.own);
    if (p.r[i] > 0) rel.push_back(rb.tol / (p.r[i] / static_cast<double>(n)));
    for (std::size_t j = 0; j < k; ++j) {
      const double diff = p.z[i * k + j] - p.y[i * k + j];
      const double err = std::isnan(diff) ? INFINITY : std::fabs(diff);
      v.max_abs_error = std::max(v.max_abs_error, err);
      if (!(err <= rb.tol) && v.pass) {
        v.pass = false;
        first = "first failing row " + std::to_string(i) + ", vector " + std::to_string(j) +
                ": |(C V - A (B V))_ic| = " + g3(err) + " > row tolerance " + g3(rb.tol) + "; ";
      }
    }
  }
  const double rms = m * n > 0 ? std::sqrt(p.squares / (static_cast<double>(m) * static_cast<double>(n))) : 0.0;
  v.power = guaranteed == 0 ? 0.0 : rms > 0 ? guaranteed / rms : INFINITY;
  if (!rel.empty()) {
    auto mid = rel.begin() + static_cast<std::ptrdiff_t>(rel.size() / 2);
    std::nth_element(rel.begin(), mid, rel.end());
    v.tol_over_value_median = *mid;
    v.tol_over_value_max = *std::max_element(rel.begin(), rel.end());
  }
  const std::string model = calibration_clause(cal, uncalibrated);
  if (cal.on && !(cal.cal.c_ratio <= kCalibrationMargin * cal.cal.ratio)) {
    v.pass = false;
    if (first.empty())
      first = "C's sampled rows round more than the calibration allows (their largest sum_j E_ij^2 / W_i is " +
              g3(cal.cal.c_ratio / cal.cal.ratio) + "x the float32 recomputation's largest, allowed " +
              g3(kCalibrationMargin) + "x); ";
  }
  v.detail = first + false_pass_line(k, v.tolerance, largest_own) + model;
  if (o.rows == 0) return v;
  // The headline figures stay the projections'; the sampled rows' are named in their own clause.
  const RowCheck rc = check_sampled(c, inner, o.gamma, o.result_gamma, ref->sampled);
  if (!rc.pass) v.pass = false;
  v.detail = first + rc.first + false_pass_line(k, v.tolerance, largest_own) + "; " +
             rows_line(rc.sampled, rc.rows, o.one_in) + " (sampled elements: largest |C_ij - (A B)_ij| " +
             g3(rc.max_abs_error) + ", largest bound " + g3(rc.largest_bound) + ", worst error/bound " +
             g3(rc.worst_ratio) + ")" + model;
  return v;
}

template Verdict sketch_product<float>(const std::string&, MatRef<float>, MatRef<float>, MatRef<float>,
                                       const SketchOptions&);
template Verdict sketch_product<double>(const std::string&, MatRef<double>, MatRef<double>, MatRef<double>,
                                        const SketchOptions&);
template Calibration calibrate_rows<float>(MatRef<float>, MatRef<float>, MatRef<float>, std::size_t, std::size_t,
                                           std::uint64_t);
template RowCheck check_rows<float>(MatRef<float>, MatRef<float>, MatRef<float>, double, double, std::size_t,
                                    std::uint64_t);
template RowCheck check_rows<double>(MatRef<double>, MatRef<double>, MatRef<double>, double, double, std::size_t,
                                     std::uint64_t);

}  // namespace shardlab
