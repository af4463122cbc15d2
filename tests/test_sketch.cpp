// harness/check/sketch.cpp: sketch_product (Freivalds check of C = op(A) op(B)), sum_gamma, false_pass_line.
// References are plain triple loops here; integer inputs make them exact.
// Over 400 lines (529) as one idea: one check, the sketch, and its bounds.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/blas.hpp"
#include "core/gemm.hpp"
#include "harness/check/sketch.hpp"

using namespace shardlab;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A matrix op(X) of op_rows x op_cols, stored row-major transposed or not, as MatRef reads it.
template <class T>
struct Mat {
  std::size_t rows, cols;  // of op(X)
  bool transposed = false;
  std::vector<T> data = std::vector<T>(rows * cols);
  T& at(std::size_t i, std::size_t j) { return data[transposed ? j * rows + i : i * cols + j]; }
  T at(std::size_t i, std::size_t j) const { return data[transposed ? j * rows + i : i * cols + j]; }
  MatRef<T> ref() const { return transposed ? MatRef<T>{data.data(), cols, rows, true} : MatRef<T>{data.data(), rows, cols}; }
};

template <class T>
Mat<T> random_mat(std::size_t rows, std::size_t cols, bool transposed, std::uint64_t seed, double lo, double hi,
                  bool integers) {
  std::mt19937_64 rng(seed);
  Mat<T> m{rows, cols, transposed};
  for (auto& x : m.data)
    x = static_cast<T>(integers ? lo + static_cast<double>(rng() % static_cast<std::uint64_t>(hi - lo + 1))
                                : lo + (hi - lo) * (static_cast<double>(rng() >> 11) * 0x1.0p-53));
  return m;
}

// C = op(A) op(B), summed left to right in T: exact for small integers, float-rounded for floats.
template <class T>
Mat<T> product(const Mat<T>& a, const Mat<T>& b, bool transposed = false) {
  Mat<T> c{a.rows, b.cols, transposed};
  for (std::size_t i = 0; i < a.rows; ++i)
    for (std::size_t j = 0; j < b.cols; ++j) {
      T acc = 0;
      for (std::size_t l = 0; l < a.cols; ++l) acc += a.at(i, l) * b.at(l, j);
      c.at(i, j) = acc;
    }
  return c;
}

// (|op(A)| |op(B)|)_ij in double: each element's allowance is gamma times this.
template <class T>
double abs_product(const Mat<T>& a, const Mat<T>& b, std::size_t i, std::size_t j) {
  double acc = 0;
  for (std::size_t l = 0; l < a.cols; ++l) acc += std::fabs(double(a.at(i, l))) * std::fabs(double(b.at(l, j)));
  return acc;
}

// max_i sum_j (|op(A)| |op(B)|)_ij: the largest row tolerance for gamma = 1.
template <class T>
double largest_row(const Mat<T>& a, const Mat<T>& b) {
  double largest = 0;
  for (std::size_t i = 0; i < a.rows; ++i) {
    double row = 0;
    for (std::size_t j = 0; j < b.cols; ++j) row += abs_product(a, b, i, j);
    largest = std::max(largest, row);
  }
  return largest;
}

template <class T>
Verdict check(const Mat<T>& c, const Mat<T>& a, const Mat<T>& b, double gamma, std::size_t vectors, std::uint64_t seed) {
  return sketch_product("C", c.ref(), a.ref(), b.ref(), {.gamma = gamma, .vectors = vectors, .seed = seed});
}

template <class T>
int passes(const Mat<T>& c, const Mat<T>& a, const Mat<T>& b, double gamma, std::size_t vectors, int seeds) {
  int n = 0;
  for (int s = 0; s < seeds; ++s) n += check(c, a, b, gamma, vectors, s).pass;
  return n;
}

const auto A = random_mat<double>(5, 7, false, 1, -9, 9, true);
const auto B = random_mat<double>(7, 6, false, 2, -9, 9, true);

}  // namespace

TEST_CASE("sum_gamma and false_pass_line (sketch)") {
  CHECK(sum_gamma(0, float_unit_roundoff) == 0.0);
  CHECK(sum_gamma(4, 0.125) == 1.0);  // 0.5 / (1 - 0.5)
  CHECK(sum_gamma(8, 0.125) == INFINITY);
  CHECK(false_pass_line(20, 3.1e-3, 1.2e-12) ==
        "sketch: 20 random +-1 vectors, false-pass probability <= 2^-20 = 9.5e-07 for any element off by more "
        "than its row's tolerance (largest 0.0031) plus the check's own rounding (largest 1.2e-12)");
  CHECK(has(false_pass_line(1, 0, 0), "1 random +-1 vector, false-pass probability <= 2^-1 = 0.5 "));
  CHECK(has(false_pass_line(2000, 0, 0), "<= 2^-2000 for any"));  // too small for a double
}

TEST_CASE("sketch_product: an exact integer product passes; the tolerance is gamma times the largest row sum") {
  const auto C = product(A, B);
  const Verdict v = check(C, A, B, 0.0, 20, 7);
  CHECK(v.pass);
  CHECK(v.max_abs_error == 0.0);
  CHECK(v.tolerance > 0.0);  // only the check's own double rounding
  CHECK(v.tolerance < 1e-10);
  CHECK(v.detail.rfind("sketch: 20 random +-1 vectors, false-pass probability <= 2^-20 = 9.5e-07 for any", 0) == 0);
  CHECK(v.line().rfind("PASS max_abs_err=0 (catches ", 0) == 0);
  CHECK(has(v.line(), " x RMS; tol "));
  const Verdict g = check(C, A, B, 0.5, 20, 7);
  CHECK(g.pass);
  CHECK(g.tolerance >= 0.5 * largest_row(A, B));
  CHECK(g.tolerance <= 0.5 * largest_row(A, B) * (1 + 1e-12));
}

TEST_CASE("sketch_product: one wrong element fails for every seed, even with one vector") {
  auto C = product(A, B);
  C.at(2, 3) += 1;  // (E V)_2 = +-1 whatever the signs
  CHECK(passes(C, A, B, 0.0, 1, 200) == 0);
  const Verdict v = check(C, A, B, 0.0, 3, 0);
  CHECK_FALSE(v.pass);
  CHECK(v.max_abs_error == 1.0);
  CHECK(has(v.detail, "first failing row 2, vector 0: |(C V - A (B V))_ic| = 1 > row tolerance "));
  CHECK(v.line().rfind("FAIL max_abs_err=1 (catches ", 0) == 0);
  CHECK(has(v.line(), " x RMS; tol "));
}

TEST_CASE("sketch_product: two errors that cancel pass half the vectors, so 2^-k is attained") {
  auto C = product(A, B);
  C.at(2, 1) += 1;
  C.at(2, 4) -= 1;  // (E V)_2 = v_1 - v_4: zero for half the sign choices
  const int one = passes(C, A, B, 0.0, 1, 200), two = passes(C, A, B, 0.0, 2, 200);
  MESSAGE("passes out of 200 seeds: " << one << " with 1 vector, " << two << " with 2");
  CHECK(one >= 70);  // binomial(200, 1/2): mean 100, sd 7
  CHECK(one <= 130);
  CHECK(two >= 25);  // binomial(200, 1/4): mean 50, sd 6
  CHECK(two <= 75);
  CHECK(passes(C, A, B, 0.0, 20, 200) == 0);
}

TEST_CASE("sketch_product: transposed operands and result agree with the triple loop") {
  for (int flags = 0; flags < 8; ++flags) {
    CAPTURE(flags);
    const auto a = random_mat<double>(4, 5, flags & 1, 3, -9, 9, true);
    const auto b = random_mat<double>(5, 3, flags & 2, 4, -9, 9, true);
    const auto c = product(a, b, flags & 4);
    CHECK(check(c, a, b, 0.0, 20, 5).pass);
  }
  // Square, so the same storage read the other way round is a valid but different operand.
  auto a = random_mat<double>(6, 6, false, 5, -9, 9, true), b = random_mat<double>(6, 6, true, 6, -9, 9, true);
  const auto c = product(a, b);
  CHECK(check(c, a, b, 0.0, 20, 1).pass);
  a.transposed = true;
  CHECK_FALSE(check(c, a, b, 0.0, 20, 1).pass);
  a.transposed = false, b.transposed = false;
  CHECK_FALSE(check(c, a, b, 0.0, 20, 1).pass);
}

TEST_CASE("sketch_product: operands read in several blocks agree with the triple loop") {
  // K = half the buffer + 1: a [3, K] operand is 3 blocks of one row, a [K, 2] one is 2 blocks.
  const std::size_t k = sketch_buffer_doubles / 2 + 1;
  for (int flags = 0; flags < 4; ++flags) {
    CAPTURE(flags);
    const auto a = random_mat<double>(3, k, flags & 1, 7, -9, 9, true);
    const auto b = random_mat<double>(k, 2, flags & 2, 8, -9, 9, true);
    auto c = product(a, b);
    CHECK(check(c, a, b, 0.0, 20, 9).pass);
    const double tol = check(c, a, b, 1.0, 1, 9).tolerance;
    CHECK(tol >= largest_row(a, b));
    CHECK(tol <= largest_row(a, b) * (1 + 1e-9));
    c.at(2, 1) += 1;
    CHECK_FALSE(check(c, a, b, 0.0, 20, 9).pass);
  }
}

TEST_CASE("sketch_product: shapes, vector count and gamma are checked") {
  const auto C = product(A, B);
  Mat<double> wrong{6, 5};
  const Verdict v = check(wrong, A, B, 0.0, 20, 0);
  CHECK_FALSE(v.pass);
  CHECK(v.max_abs_error == INFINITY);
  CHECK(v.detail == "C is [6, 5], expected [5, 6] = op(A) op(B)");
  CHECK_THROWS_AS(check(C, A, A, 0.0, 20, 0), Error);  // [5, 7] times [5, 7]
  CHECK_THROWS_AS(check(C, A, B, 0.0, 0, 0), Error);
  CHECK_THROWS_AS(check(C, A, B, -1.0, 20, 0), Error);
  auto nan = C;
  nan.at(4, 5) = NAN;
  CHECK_FALSE(check(nan, A, B, 0.0, 20, 0).pass);
}

TEST_CASE("sketch_product: float products pass under Higham's gamma; 10 gamma off everywhere fails") {
  const std::size_t m = 33, k = 257, n = 19;  // n odd: a sum of n signs is never 0
  const double gamma = sum_gamma(k, float_unit_roundoff);
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    CAPTURE(seed);
    const double lo = seed % 2 ? 0.0 : -1.0;  // all-positive inputs: rounding errors do not cancel
    const auto a = random_mat<float>(m, k, seed % 3 == 0, 10 + seed, lo, 1, false);
    const auto b = random_mat<float>(k, n, seed % 3 == 1, 20 + seed, lo, 1, false);
    const auto c = product(a, b);
    const Verdict ok = check(c, a, b, gamma, 20, seed);
    CHECK(ok.pass);
    CHECK(ok.max_abs_error < ok.tolerance);
    if (lo == 0.0) {  // then P = |A| |B|: 10 gamma relative is 10 times each element's allowance
      Mat<float> up = c, down = c;
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
          const double p = abs_product(a, b, i, j);
          up.at(i, j) = static_cast<float>(p * (1 + 10 * gamma));
          down.at(i, j) = static_cast<float>(p * (1 - 10 * gamma));
        }
      CHECK_FALSE(check(up, a, b, gamma, 20, seed).pass);
      CHECK_FALSE(check(down, a, b, gamma, 20, seed).pass);
    }
  }
}

TEST_CASE("sketch_product: float, one element just over its row's tolerance: at most about half pass one vector") {
  const auto a = random_mat<float>(8, 64, false, 30, -1, 1, false), b = random_mat<float>(64, 16, false, 31, -1, 1, false);
  const double gamma = sum_gamma(64, float_unit_roundoff);
  auto c = product(a, b);
  const Verdict ok = check(c, a, b, gamma, 20, 0);
  REQUIRE(ok.pass);
  c.at(5, 9) += static_cast<float>(1.01 * ok.tolerance);
  const int one = passes(c, a, b, gamma, 1, 200);
  MESSAGE(one << " of 200 seeds pass with 1 vector");
  CHECK(one <= 130);
  CHECK(passes(c, a, b, gamma, 20, 200) == 0);
}

TEST_CASE("sketch_product: the row bound is Hoeffding's: a full allowance of one sign passes, 4 times it fails") {
  // E_ij = f gamma P_ij > 0 with P = |A| |B| on a 2000-wide row. The worst-case row tolerance
  // gamma sum_j P_ij passes any f <= 1 and, as (E V)_i grows like sqrt(N), f = 4 too. Hoeffding's
  // bound (sketch.cpp) allows about 7 times sqrt(sum_j (gamma P_ij)^2): f = 1, at every element's
  // bound, still passes (an honest C may sit there), f = 4 fails.
  const auto a = random_mat<float>(3, 32, false, 40, 0, 1, false), b = random_mat<float>(32, 2000, false, 41, 0, 1, false);
  const double gamma = sum_gamma(32, float_unit_roundoff);
  auto spread = [&](double f) {
    auto c = product(a, b);
    for (std::size_t i = 0; i < c.rows; ++i)
      for (std::size_t j = 0; j < c.cols; ++j) c.at(i, j) = static_cast<float>(abs_product(a, b, i, j) * (1 + f * gamma));
    return c;
  };
  for (std::uint64_t seed = 0; seed < 20; ++seed) CHECK(check(spread(1.0), a, b, gamma, 20, seed).pass);
  CHECK_FALSE(check(spread(4.0), a, b, gamma, 20, 0).pass);
}

TEST_CASE("sketch_product: power is the largest row tolerance plus the check's rounding over C's RMS") {
  const auto a = random_mat<float>(8, 64, false, 30, -1, 1, false), b = random_mat<float>(64, 16, false, 31, -1, 1, false);
  const double gamma = sum_gamma(64, float_unit_roundoff);
  const auto c = product(a, b);
  const Verdict v = check(c, a, b, gamma, 20, 0);
  REQUIRE(v.pass);
  double squares = 0;
  for (std::size_t i = 0; i < c.rows; ++i)
    for (std::size_t j = 0; j < c.cols; ++j) squares += double(c.at(i, j)) * c.at(i, j);
  const double rms = std::sqrt(squares / double(c.rows * c.cols));
  CHECK(v.power >= v.tolerance / rms);
  CHECK(v.power <= v.tolerance / rms * (1 + 1e-5));  // the rounding: ~1e-7 of it
  CHECK(v.tol_over_value_max >= v.tol_over_value_median);
  CHECK(v.tol_over_value_median > 0);
}

TEST_CASE("sketch_product: result_gamma allows each element a last rounding relative to itself, row by row") {
  // A C of products rounded once to bfloat16 (8 significant bits): integers 175..567 mostly round.
  const auto a = random_mat<double>(6, 7, false, 5, 5, 9, true), b = random_mat<double>(7, 9, false, 6, 5, 9, true);
  Mat<double> c = product(a, b);
  double largest_row_c = 0;
  int rounded = 0;
  for (std::size_t i = 0; i < c.rows; ++i) {
    double row = 0;
    for (std::size_t j = 0; j < c.cols; ++j) {
      const double exact = c.at(i, j);
      c.at(i, j) = round_to(DType::bfloat16, exact);
      rounded += c.at(i, j) != exact;
      row += std::fabs(c.at(i, j));
    }
    largest_row_c = std::max(largest_row_c, row);
  }
  REQUIRE(rounded > 10);
  const double q = 0x1.0p-8 / (1 - 0x1.0p-8);  // |fl(z) - z| <= u |z| <= u / (1 - u) |fl(z)|
  for (std::uint64_t seed = 0; seed < 10; ++seed) {
    const Verdict v = sketch_product("C", c.ref(), a.ref(), b.ref(), {.result_gamma = q, .vectors = 20, .seed = seed});
    CAPTURE(seed);
    CHECK(v.pass);
    // The row tolerance is q sum_j |C_ij| (|v_j| = 1), plus the check's own rounding.
    CHECK(v.tolerance == doctest::Approx(q * largest_row_c).epsilon(1e-9));
  }
  // Without it the rounded C is not the product.
  CHECK_FALSE(sketch_product("C", c.ref(), a.ref(), b.ref(), {.vectors = 20}).pass);
  CHECK_THROWS_AS(sketch_product("C", c.ref(), a.ref(), b.ref(), {.result_gamma = -1.0, .vectors = 20}), Error);
  // One element off by its row's whole tolerance, twice over: caught.
  Mat<double> off = c;
  off.at(3, 4) += 2 * q * largest_row_c + 1;
  CHECK_FALSE(sketch_product("C", off.ref(), a.ref(), b.ref(), {.result_gamma = q, .vectors = 20}).pass);
}

TEST_CASE("sample_rows and rows_line (sketch rows)") {
  const auto rows = sample_rows(100, 10, 3);
  REQUIRE(rows.size() == 10);
  CHECK(std::is_sorted(rows.begin(), rows.end()));
  CHECK(std::adjacent_find(rows.begin(), rows.end()) == rows.end());  // distinct
  CHECK(rows.back() < 100);
  CHECK(sample_rows(100, 10, 3) == rows);  // the same seed, the same rows
  CHECK(sample_rows(7, 64, 0) == std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6});
  CHECK(sample_rows(0, 64, 0).empty());
  // Every row equally likely: 2000 draws of 5 of 20, each row drawn 500 times on average (sd ~19).
  std::vector<int> count(20, 0);
  for (std::uint64_t s = 0; s < 2000; ++s)
    for (std::size_t i : sample_rows(20, 5, s)) ++count[i];
  for (int c : count) {
    CHECK(c > 420);
    CHECK(c < 580);
  }
  CHECK(rows_line(64, 4096, 8) == "rows: 64 of 4096 recomputed exactly, each element against its own bound; an error in "
                                  "1/8 of the rows is missed with probability <= (7/8)^64 = 0.00019");
  CHECK(rows_line(32, 32, 8) ==
        "rows: 32 of 32 recomputed exactly, each element against its own bound; every row is checked, so no error is missed");
}

TEST_CASE("sketch check_rows: honest products pass element by element, transposed or not; one wrong element fails when drawn") {
  for (int flags = 0; flags < 8; ++flags) {
    CAPTURE(flags);
    const auto a = random_mat<float>(30, 257, flags & 1, 50 + flags, -1, 1, false);
    const auto b = random_mat<float>(257, 19, flags & 2, 60 + flags, -1, 1, false);
    auto c = product(a, b, flags & 4);
    const double gamma = sum_gamma(257, float_unit_roundoff);
    const RowCheck ok = check_rows(c.ref(), a.ref(), b.ref(), gamma, 0.0, 8, flags);
    CHECK(ok.pass);
    CHECK(ok.sampled == 8);
    CHECK(ok.rows == 30);
    CHECK(ok.worst_ratio <= 1);
    CHECK(ok.max_abs_error > 0);  // float rounding seen, and allowed
    // Without the rounding allowance the float product is not exact.
    CHECK_FALSE(check_rows(c.ref(), a.ref(), b.ref(), 0.0, 0.0, 30, flags).pass);
    // Every row drawn: an element off by 1.01 times its own allowance fails.
    const double off = 1.01 * gamma * abs_product(a, b, 7, 3) + 1e-6;
    c.at(7, 3) = static_cast<float>(static_cast<double>(c.at(7, 3)) + off);
    const RowCheck bad = check_rows(c.ref(), a.ref(), b.ref(), gamma, 0.0, 30, flags);
    CHECK_FALSE(bad.pass);
    CHECK(has(bad.first, "first failing sampled element [7, 3]: |C_ij - (A B)_ij| = "));
  }
  Mat<double> wrong{6, 5};
  CHECK_THROWS_AS(check_rows(wrong.ref(), A.ref(), B.ref(), 0.0, 0.0, 4, 0), Error);
}

TEST_CASE("sketch check_rows: an error in k of n rows is missed about C(n-k, r) / C(n, r) <= (1 - k/n)^r of the time") {
  const std::size_t n = 40, k = 4, r = 8;
  const auto a = random_mat<double>(n, 9, false, 70, -9, 9, true), b = random_mat<double>(9, 5, false, 71, -9, 9, true);
  auto c = product(a, b);
  for (std::size_t i : {3u, 17u, 18u, 39u}) c.at(i, 2) += 1;  // 4 wrong rows of 40
  double exact = 1;  // C(36, 8) / C(40, 8): the chance all 8 rows drawn are among the 36 right ones
  for (std::size_t j = 0; j < r; ++j) exact *= static_cast<double>(n - k - j) / static_cast<double>(n - j);
  const double bound = std::pow(1.0 - double(k) / double(n), double(r));
  REQUIRE(exact <= bound);
  const int seeds = 200;
  int missed = 0;
  for (int s = 0; s < seeds; ++s) missed += check_rows(c.ref(), a.ref(), b.ref(), 0.0, 0.0, r, s).pass;
  const double mean = seeds * exact, sd = std::sqrt(seeds * exact * (1 - exact));
  MESSAGE(missed << " of " << seeds << " seeds missed it; exact mean " << mean << " (sd " << sd << "), bound "
                 << seeds * bound);
  CHECK(missed <= seeds * bound + 3 * std::sqrt(seeds * bound * (1 - bound)));  // 0.43^8 allows 86 +- 7
  CHECK(std::fabs(missed - mean) <= 4 * sd);                                      // and it is near the exact rate
  // All rows drawn: never missed. Fewer wrong rows, more rows drawn: missed less often.
  for (int s = 0; s < seeds; ++s) CHECK_FALSE(check_rows(c.ref(), a.ref(), b.ref(), 0.0, 0.0, n, s).pass);
  // Through sketch_product: the projections catch this one anyway (an integer error of 1), so the
  // rows show in the detail only.
  const Verdict v = sketch_product("C", c.ref(), a.ref(), b.ref(), {.vectors = 20, .rows = 64, .one_in = 8});
  CHECK_FALSE(v.pass);
  CHECK(has(v.detail, "rows: 40 of 40 recomputed exactly"));
}

TEST_CASE("sketch_product with rows: a spread error the projections pass fails when its rows are drawn") {
  // 1.5 times every element's allowance on a 2000-wide row, all one sign: the projections pass it
  // (Hoeffding's bound is about 7 times the allowances' root sum of squares), the sampled rows
  // compare each element with its own bound.
  const auto a = random_mat<float>(3, 32, false, 40, 0, 1, false), b = random_mat<float>(32, 2000, false, 41, 0, 1, false);
  const double gamma = sum_gamma(32, float_unit_roundoff);
  auto c = product(a, b);
  for (std::size_t i = 0; i < c.rows; ++i)
    for (std::size_t j = 0; j < c.cols; ++j) c.at(i, j) = static_cast<float>(abs_product(a, b, i, j) * (1 + 1.5 * gamma));
  const Verdict alone = sketch_product("C", c.ref(), a.ref(), b.ref(), {.gamma = gamma, .vectors = 20});
  const Verdict both = sketch_product("C", c.ref(), a.ref(), b.ref(),
                                      {.gamma = gamma, .vectors = 20, .rows = 64, .one_in = 8});
  CHECK(alone.pass);
  CHECK_FALSE(both.pass);
  CHECK(both.max_abs_error == alone.max_abs_error);  // the headline figures stay the projections'
  CHECK(both.tolerance == alone.tolerance);
  CHECK(has(both.detail, "first failing sampled element [0, "));
  CHECK(has(both.detail, "; rows: 3 of 3 recomputed exactly, each element against its own bound; every row is checked, "
                         "so no error is missed (sampled elements: largest |C_ij - (A B)_ij| "));
  // An honest product passes both.
  const auto honest = product(a, b);
  CHECK(sketch_product("C", honest.ref(), a.ref(), b.ref(),
                       {.gamma = gamma, .vectors = 20, .rows = 64, .one_in = 8}).pass);
}

namespace {

// C = op(A) op(B) as a sharded float32 run sums it: the inner dim cut into `group` blocks, each
// block's product by sgemm (core/gemm.hpp), the partial sums added in float32, first block first
// (as the calibration recomputes its rows) or last first (as a ring may).
Mat<float> sgemm_in_blocks(const Mat<float>& a, const Mat<float>& b, std::size_t group, bool last_first = false) {
  const std::size_t m = a.rows, k = a.cols, n = b.cols, q = (k + group - 1) / group, blocks = (k + q - 1) / q;
  Mat<float> c{m, n};
  std::vector<float> ab, bb, part(m * n);
  for (std::size_t t = 0; t < blocks; ++t) {
    const std::size_t k0 = (last_first ? blocks - 1 - t : t) * q, kb = std::min(q, k - k0);
    ab.assign(m * kb, 0.0f);
    bb.assign(kb * n, 0.0f);
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t l = 0; l < kb; ++l) ab[i * kb + l] = a.at(i, k0 + l);
    for (std::size_t l = 0; l < kb; ++l)
      for (std::size_t j = 0; j < n; ++j) bb[l * n + j] = b.at(k0 + l, j);
    {
      const OneBlasThread one;  // as every device computes (Runtime pins it), whatever OPENBLAS_NUM_THREADS says
      batched_gemm(1, m, n, kb, ab.data(), false, bb.data(), false, part.data());
    }
    for (std::size_t e = 0; e < m * n; ++e) c.data[e] = t == 0 ? part[e] : c.data[e] + part[e];
  }
  return c;
}

Verdict calibrated(const Mat<float>& c, const Mat<float>& a, const Mat<float>& b, std::size_t group, std::uint64_t seed) {
  return sketch_product("C", c.ref(), a.ref(), b.ref(),
                        {.gamma = sum_gamma(a.cols, float_unit_roundoff), .vectors = 20, .seed = seed, .rows = 16,
                         .one_in = 8, .calibrate_group = group});
}

}  // namespace

TEST_CASE("sketch_product calibrated: sgemm products in blocks pass at under 1e-3 x RMS, where the bounds give > 1e-2") {
  // Long sums with cancellation (inputs of both signs): the worst-case and Hoeffding bounds take
  // every rounding at K u |a||b|; the calibrated tolerance measures float32's rounding instead.
  const std::size_t m = 96, k = 4096, n = 512;
  for (std::uint64_t seed = 0; seed < 4; ++seed) {
    CAPTURE(seed);
    const auto a = random_mat<float>(m, k, seed % 2 == 1, 50 + seed, -1, 1, false);
    const auto b = random_mat<float>(k, n, seed % 2 == 0, 60 + seed, -1, 1, false);
    const std::size_t group = 1 + seed % 4;
    const auto c = sgemm_in_blocks(a, b, group);
    const Verdict bound = sketch_product("C", c.ref(), a.ref(), b.ref(),
                                         {.gamma = sum_gamma(k, float_unit_roundoff), .vectors = 20, .seed = seed});
    const Verdict v = calibrated(c, a, b, group, seed);
    CHECK(bound.pass);
    CHECK(v.pass);
    CHECK(bound.power > 1e-2);
    CHECK(v.power < 1e-3);  // float32's floor (verify.hpp)
    CHECK(has(v.detail, "calibrated on 16 rows recomputed in float32"));
  }
}

TEST_CASE("sketch_product calibrated: honest products of random shapes, groups, orders and signs pass (none of 60 FAIL)") {
  // C is summed as the calibration assumes, or last block first, or over one block more or fewer
  // than the calibration's group: other orders a correct run may take.
  std::mt19937_64 rng(99);
  int passed = 0;
  for (int t = 0; t < 60; ++t) {
    const std::size_t m = 8 + rng() % 120, k = 16 + rng() % 3000, n = 1 + rng() % 400, group = 1 + rng() % 8;
    const double lo = rng() % 3 == 0 ? 0.0 : -1.0;
    const auto a = random_mat<float>(m, k, rng() % 2, rng(), lo, 1, false);
    const auto b = random_mat<float>(k, n, rng() % 2, rng(), lo, 1, false);
    const std::size_t c_group = t % 3 == 0 ? group : t % 3 == 1 ? group + 1 : std::max<std::size_t>(1, group - 1);
    const Verdict v = calibrated(sgemm_in_blocks(a, b, c_group, t % 2 == 1), a, b, group, rng());
    CAPTURE(m);
    CAPTURE(k);
    CAPTURE(n);
    CAPTURE(group);
    CHECK_MESSAGE(v.pass, v.detail);
    passed += v.pass;
  }
  CHECK(passed == 60);
}

TEST_CASE("sketch_product calibrated: one element off by its row's tolerance fails; a small error in every element fails") {
  const std::size_t m = 64, k = 4096, n = 256;
  const auto a = random_mat<float>(m, k, false, 70, -1, 1, false), b = random_mat<float>(k, n, false, 71, -1, 1, false);
  auto c = sgemm_in_blocks(a, b, 2);
  const Verdict ok = calibrated(c, a, b, 2, 0);
  REQUIRE(ok.pass);
  double squares = 0;
  for (float x : c.data) squares += double(x) * x;
  const double rms = std::sqrt(squares / double(c.data.size()));
  // One element off by a little more than the power: caught for every seed (one sign of its
  // vector entry always leaves the row's tolerance).
  auto one = c;
  one.at(37, 101) += static_cast<float>(1.01 * ok.power * rms);
  for (std::uint64_t seed = 0; seed < 10; ++seed) CHECK_FALSE(calibrated(one, a, b, 2, seed).pass);
  // Every element 1e-4 x RMS too large (some 250 times float32's rounding here, 4e-7 x RMS), and
  // every element off by 1e-6 x RMS with a random sign (2.5 times the rounding), which the rows'
  // projections let through but the sampled rows' sum_j E_ij^2 does not.
  auto spread = c;
  for (auto& x : spread.data) x += static_cast<float>(1e-4 * rms);
  CHECK_FALSE(calibrated(spread, a, b, 2, 0).pass);
  auto noisy = c;
  std::mt19937_64 rng(5);
  for (auto& x : noisy.data) x += static_cast<float>((rng() & 1 ? 1e-6 : -1e-6) * rms);
  const Verdict v = calibrated(noisy, a, b, 2, 0);
  CHECK_FALSE(v.pass);
  CHECK(has(v.detail, "C's sampled rows round more than the calibration allows"));
  MESSAGE(v.detail);
  // The uncalibrated check passes it: what the model check adds.
  CHECK(sketch_product("C", noisy.ref(), a.ref(), b.ref(),
                       {.gamma = sum_gamma(k, float_unit_roundoff), .vectors = 20, .rows = 16}).pass);
}

TEST_CASE("sketch_product calibrated: rows that do not cancel, left out of the sample, keep the bounds and pass") {
  // B >= 0; most rows of A have both signs (their sums cancel: |C| ~ sqrt(K)), rows 3, 40 and 77
  // are >= 0 (no cancellation: |C| ~ K, and their float32 sums round ~sqrt(K) times more per unit
  // of W_i). Unsampled, such a row given the sampled rows' allowance would FAIL an honest C.
  const std::size_t m = 96, k = 4096, n = 128;
  auto a = random_mat<float>(m, k, false, 80, -1, 1, false);
  const auto b = random_mat<float>(k, n, false, 81, 0, 1, false);
  std::mt19937_64 rng(82);
  for (std::size_t i : {3, 40, 77})
    for (std::size_t l = 0; l < k; ++l) a.at(i, l) = static_cast<float>(static_cast<double>(rng() >> 11) * 0x1.0p-53);
  const auto c = sgemm_in_blocks(a, b, 2);
  int kept = 0;
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    CAPTURE(seed);
    const Verdict v = calibrated(c, a, b, 2, seed);
    CHECK_MESSAGE(v.pass, v.detail);
    kept += has(v.detail, "rows cancel unlike the sampled ones and keep the bounds");
  }
  CHECK(kept > 0);  // some seeds left those rows out of the 16 sampled
}
