// harness/check/verify.cpp: compare() (one tolerance or one per element), reduction_tolerance(),
// gemm_rounding(), verify_output() and Verdict::line().
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/layout.hpp"
#include "harness/check/verify.hpp"

using namespace shardlab;

namespace {
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
Tensor filled(const Shape& shape, double value) {
  Tensor t = xt::zeros<double>(shape);
  t.fill(value);
  return t;
}
}  // namespace

TEST_CASE("compare: exact pass") {
  Tensor a = iota({3, 4});
  Verdict v = compare("C", a, iota({3, 4}));
  CHECK(v.pass);
  CHECK(v.name == "C");
  CHECK(v.max_abs_error == 0.0);
  CHECK(v.tolerance == 0.0);
  CHECK(v.detail.empty());
  CHECK(v.line() == "PASS (exact, no tolerance)");
}

TEST_CASE("compare: fail reports the first bad index and the largest error") {
  Tensor want = iota({3, 4});
  Tensor got = want;
  got(1, 2) += 2;  // want 6, got 8: first bad index in row-major order
  got(2, 3) -= 5;  // want 11, got 6: the largest error
  Verdict v = compare("C", got, want);
  CHECK_FALSE(v.pass);
  CHECK(v.max_abs_error == 5.0);
  CHECK(v.detail == "first bad index [1, 2]: got 8, want 6");
  CHECK(v.line() == "FAIL max_abs_err=5 (exact, no tolerance); first bad index [1, 2]: got 8, want 6");
  // rank 3 index
  Tensor w3 = iota({2, 3, 4});
  Tensor g3 = w3;
  g3(1, 0, 3) = -1;  // flat 15
  CHECK(compare("T", g3, w3).detail == "first bad index [1, 0, 3]: got -1, want 15");
}

TEST_CASE("compare: tolerance") {
  Tensor want = Tensor{1.0, 2.0, 3.0};
  Tensor got = Tensor{1.0, 2.25, 3.5};
  Verdict ok = compare("s", got, want, 0.5);
  CHECK(ok.pass);
  CHECK(ok.max_abs_error == 0.5);  // at the tolerance still passes
  // Power: (0.5 + 0.5) over the RMS sqrt(14/3) of want.
  CHECK(ok.line() == "PASS max_abs_err=0.5 (catches 0.46 x RMS; tol 0.5)");
  Verdict bad = compare("s", got, want, 0.25);
  CHECK_FALSE(bad.pass);
  CHECK(bad.detail == "first bad index [2]: got 3.5, want 3");
}

TEST_CASE("compare: a tolerance per element") {
  const Tensor want = Tensor{1.0, 2.0, 3.0, 4.0};
  const Tensor tol = Tensor{0.5, 0.0, 0.25, 2.0};
  // Element 3 is off by 1.5: within its own 2, beyond every other element's.
  Verdict ok = compare("s", Tensor{1.25, 2.0, 2.75, 5.5}, want, tol);
  CHECK(ok.pass);
  CHECK(ok.max_abs_error == 1.5);
  CHECK(ok.tolerance == 2.0);       // the largest
  // Ratios 0.25/0.5, 0 (exact where the tolerance is 0), 0.25/0.25 at the limit, 1.5/2.
  CHECK(ok.worst_ratio == 1.0);
  CHECK(ok.detail.empty());
  // Power: (2 + 1.5) over the RMS sqrt(30/4) of want.
  CHECK(ok.line() == "PASS max_abs_err=1.5 (catches 1.3 x RMS; worst err/tol 1, tol per element up to 2)");
  // 0.5 off where the tolerance is 0.25 fails, though 0.5 is below the largest tolerance.
  Verdict bad = compare("s", Tensor{1.0, 2.0, 3.5, 4.0}, want, tol);
  CHECK_FALSE(bad.pass);
  CHECK(bad.worst_ratio == 2.0);
  CHECK(bad.detail == "first bad index [2]: got 3.5, want 3, tol 0.25");
  // Any error where the tolerance is 0: infinitely over.
  Verdict zero = compare("s", Tensor{1.0, 2.0 + 1e-12, 3.0, 4.0}, want, tol);
  CHECK_FALSE(zero.pass);
  CHECK(std::isinf(zero.worst_ratio));
  // NaN never passes; shapes are checked.
  CHECK_FALSE(compare("s", Tensor{1.0, NAN, 3.0, 4.0}, want, tol).pass);
  const Verdict shape = compare("s", Tensor{1.0, 2.0}, want, tol);
  CHECK_FALSE(shape.pass);
  CHECK(has(shape.detail, "has shape [2], expected [4]"));
  CHECK_THROWS_AS(compare("s", want, want, Tensor{1.0}), Error);
  // A scalar tolerance keeps the old line.
  CHECK(compare("s", want, want, 0.5).worst_ratio < 0);
  CHECK(compare("s", want, want, 0.5).line() == "PASS max_abs_err=0 (catches 0.18 x RMS; tol 0.5)");
}

TEST_CASE("every check's line states its power: exact, exact by replay, catches N x RMS, or its claim") {
  Verdict counted;  // a yes/no check of a count: any difference fails it
  CHECK(counted.line() == "PASS (exact, no tolerance)");
  counted.pass = false;
  counted.detail = "ran 3 all_reduces";
  CHECK(counted.line() == "FAIL (exact, no tolerance); ran 3 all_reduces");
  Verdict gates;  // a tolerance and no power of its own: its claim says what it catches
  gates.tolerance = 1e-8;
  gates.claim = "catches a gate off by more than u|g|";
  CHECK(gates.line() == "PASS max_abs_err=0 (catches a gate off by more than u|g|; tol 1e-08)");
  CHECK(power_cell(gates) == "catches a gate off by more than u|g|");
  Verdict forgot = gates;  // a tolerance, no power and no claim: said, so a test can find it
  forgot.claim.clear();
  CHECK(power_phrase(forgot) == "power not measured");
  const Tensor want = Tensor{1.0, 2.0, 3.0, 4.0};
  Verdict replayed = compare("y", want, want, 0.5);
  std::vector<Verdict> checks = {replayed};
  cover_by_replays(checks, {ReplayRecord{true, 2, 8, ""}});
  REQUIRE(checks[0].replayed);
  CHECK(checks[0].line() == "PASS max_abs_err=0 (exact by replay; tol 0.5)");
  CHECK(power_cell(checks[0]) == "exact by replay");
  CHECK(checks[1].line() == "PASS (exact, no tolerance); 1 run, 2 blocks, 8 elements bit for bit");
  // Power 0 is exact, never "0 x RMS"; a table's cell is short.
  CHECK(power_cell(compare("y", want, want)) == "exact");
  CHECK(power_cell(compare("y", want, want, 0.5)) == "0.18 x RMS");
}

TEST_CASE("gemm_rounding: the gammas written out") {
  const double f = 0x1.0p-24, b = 0x1.0p-8, d = 0x1.0p-53;
  // float32, 64 terms over a group of 4: 64 + 3 roundings in float32, nothing relative to the result.
  GemmRounding r = gemm_rounding(DType::float32, 64, 4);
  CHECK(r.product == doctest::Approx(67 * f / (1 - 67 * f)).epsilon(1e-12));
  CHECK(r.result == 0.0);
  CHECK(gemm_rounding(DType::float64, 10).product == doctest::Approx(10 * d / (1 - 10 * d)).epsilon(1e-12));
  // bfloat16, 64 terms over 4 devices: float32 sums, then the local rounding and 2 of the 3 adds
  // relative to |A| |B| (gamma_3 of 2^-8 counts 3), the last add relative to the result.
  r = gemm_rounding(DType::bfloat16, 64, 4);
  const double gc = 64 * f / (1 - 64 * f), gt = 3 * b / (1 - 3 * b);
  CHECK(r.product == doctest::Approx(gc + gt + gc * gt).epsilon(1e-12));
  CHECK(r.result == doctest::Approx(b / (1 - b)).epsilon(1e-12));
  // One device: the single rounding to bfloat16 is the last one.
  r = gemm_rounding(DType::bfloat16, 64, 1);
  CHECK(r.product == doctest::Approx(gc).epsilon(1e-12));
  CHECK(r.result == doctest::Approx(b / (1 - b)).epsilon(1e-12));
}

TEST_CASE("gemm_rounding bounds a bfloat16 dot product reduced over a ring, and is not loose by orders") {
  // Each device sums its k/P products in float32 and rounds to bfloat16; the partial sums are added
  // one at a time in float32, each sum rounded to bfloat16 (what add_elements does). Exact value in
  // double: products of two bfloat16 are exact, and these sums of them need far fewer than 53 bits.
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const std::size_t k = 256;
  double worst = 0;
  for (std::size_t group : {1, 2, 4, 8}) {
    const GemmRounding g = gemm_rounding(DType::bfloat16, k, group);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> a(k), bv(k);
      double exact = 0, abs_sum = 0;
      for (std::size_t l = 0; l < k; ++l) {
        a[l] = float(bfloat16(dist(rng) + (trial % 2 ? 0.5f : 0.0f))), bv[l] = float(bfloat16(dist(rng)));
        exact += double(a[l]) * bv[l];
        abs_sum += std::fabs(double(a[l]) * bv[l]);
      }
      bfloat16 acc;
      for (std::size_t p = 0; p < group; ++p) {
        float local = 0;
        for (std::size_t l = p * k / group; l < (p + 1) * k / group; ++l) local += a[l] * bv[l];
        acc = p == 0 ? bfloat16(local) : bfloat16(float(acc) + float(bfloat16(local)));
      }
      const double got = float(acc), bound = g.product * abs_sum + g.result * std::fabs(got);
      CAPTURE(group);
      CHECK(std::fabs(got - exact) <= bound);
      worst = std::max(worst, std::fabs(got - exact) / bound);
    }
  }
  CHECK(worst > 0.05);  // some trial uses more than 5% of its bound
}

TEST_CASE("compare: shape mismatch") {
  Verdict v = compare("C", iota({2, 3}), iota({3, 2}));
  CHECK_FALSE(v.pass);
  CHECK(std::isinf(v.max_abs_error));
  CHECK(v.detail == "C has shape [2, 3], expected [3, 2]");
  CHECK_FALSE(compare("C", iota({6}), iota({2, 3})).pass);
}

TEST_CASE("compare: NaN never passes") {
  Tensor want = Tensor{{1.0, 2.0}, {3.0, 4.0}};
  Tensor got = want;
  got(0, 1) = NAN;
  Verdict v = compare("C", got, want, 1e300);
  CHECK_FALSE(v.pass);
  CHECK(std::isinf(v.max_abs_error));
  CHECK(has(v.detail, "the sharded run holds nan at [0, 1]"));  // an overflow, named as such
  // NaN in the reference is a failure too
  Tensor want_nan = want;
  want_nan(1, 0) = NAN;
  Verdict w = compare("C", want, want_nan);
  CHECK_FALSE(w.pass);
  CHECK(has(w.detail, "the reference holds nan at [1, 0]"));
  // NaN in both: the computation is broken either way
  Verdict both = compare("C", got, got);
  CHECK_FALSE(both.pass);
}

TEST_CASE("reduction_tolerance = (terms-1) * DBL_EPSILON * terms * max_abs_term") {
  CHECK(reduction_tolerance(0, 5.0) == 0.0);
  CHECK(reduction_tolerance(1, 5.0) == 0.0);
  CHECK(reduction_tolerance(2, 1.0) == 2 * DBL_EPSILON);
  CHECK(reduction_tolerance(4, 2.0) == 24 * DBL_EPSILON);  // 3 * 4 * 2
  CHECK(reduction_tolerance(1000, 0.5) == doctest::Approx(999 * 1000 * 0.5 * DBL_EPSILON).epsilon(1e-15));
  CHECK(reduction_tolerance(10, 0.0) == 0.0);
}

TEST_CASE("reduction_tolerance bounds two summation orders of the same numbers") {
  // Forward and backward sums of 4096 values in [-1, 1): both are recursive summations.
  Tensor x = random_uniform({4096}, 11, -1.0, 1.0);
  double fwd = 0, bwd = 0, biggest = 0;
  for (std::size_t i = 0; i < x.size(); ++i) fwd += x(i);
  for (std::size_t i = x.size(); i-- > 0;) bwd += x(i);
  for (double v : x) biggest = std::max(biggest, std::fabs(v));
  CHECK(std::fabs(fwd - bwd) <= reduction_tolerance(x.size(), biggest));
}

TEST_CASE("verify_output: stitched blocks against the reference") {
  const Mesh mesh = Mesh::parse("X=2,Y=4");
  const Spec spec = Spec::parse("X,_");
  const Tensor want = iota({4, 3});
  RunResult run;
  for (int d = 0; d < 8; ++d) run.outputs.push_back(Outputs{{"C", local_block(want, mesh, spec, d)}});

  Verdict ok = verify_output(mesh, spec, run, "C", want);
  CHECK(ok.pass);
  CHECK(ok.name == "C");
  CHECK(ok.max_abs_error == 0.0);

  Tensor off = want;
  off(3, 1) = 100;
  Verdict bad = verify_output(mesh, spec, run, "C", off);
  CHECK_FALSE(bad.pass);
  CHECK(bad.detail == "first bad index [3, 1]: got 10, want 100");
}

TEST_CASE("verify_output: replica disagreement fails even when the last replica is right") {
  const Mesh mesh = Mesh::parse("X=2,Y=4");
  const Spec spec = Spec::parse("X,_");
  const Tensor want = iota({4, 3});
  RunResult run;
  for (int d = 0; d < 8; ++d) run.outputs.push_back(Outputs{{"C", local_block(want, mesh, spec, d)}});
  run.outputs[5]["C"](1, 2) = -7;  // device 5 = (x=1, y=1): rows 2..3, element [1, 2] = want(3, 2) = 11
  Verdict v = verify_output(mesh, spec, run, "C", want);
  CHECK_FALSE(v.pass);
  CHECK(v.detail ==
        "replicas of C disagree: device 5 has -7 at local index 5 of its block [2:4, 0:3], an earlier replica has 11");

  // corrupting the last replica (device 7) also makes the stitched values wrong
  RunResult run2;
  for (int d = 0; d < 8; ++d) run2.outputs.push_back(Outputs{{"C", local_block(want, mesh, spec, d)}});
  run2.outputs[7]["C"](0, 0) = 0.5;  // want(2, 0) = 6
  Verdict w = verify_output(mesh, spec, run2, "C", want);
  CHECK_FALSE(w.pass);
  CHECK(has(w.detail, "replicas of C disagree: device 7 has 0.5"));
  CHECK(has(w.detail, "; first bad index [2, 0]: got 0.5, want 6"));
}

TEST_CASE("verify_output: partial sums are added before comparing") {
  const Mesh mesh = Mesh::parse("X=2,Y=4");
  RunResult run;
  for (int d = 0; d < 8; ++d) run.outputs.push_back(Outputs{{"P", filled({2}, d % 4)}});
  // term y holds y everywhere: the sum is 0+1+2+3 = 6
  CHECK(verify_output(mesh, Spec::parse("_{Y}"), run, "P", Tensor{6.0, 6.0}).pass);
  CHECK_FALSE(verify_output(mesh, Spec::parse("_{Y}"), run, "P", Tensor{6.0, 7.0}).pass);
}

TEST_CASE("verify_output: a device without the named output is an error") {
  const Mesh mesh = Mesh::parse("2");
  RunResult run;
  run.outputs = {Outputs{{"C", Tensor{1.0}}}, Outputs{{"D", Tensor{1.0}}}};
  try {
    verify_output(mesh, Spec::parse("X"), run, "C", Tensor{1.0, 1.0});
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::device);
    CHECK(has(e.what(), "no block named C"));
  }
}

TEST_CASE("compare: inf or NaN on either side is an overflow, failed with its own verdict, whatever the tolerance") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(compare("x", Tensor({1.0, -2.0}), Tensor({1.0, -2.0}), 0.0).pass);
  // Equal infinities differ by 0, yet the values left the type's range: no tolerance judges them.
  const Verdict same = compare("t", Tensor({1.0, inf}), Tensor({1.0, inf}), 0.0);
  CHECK_FALSE(same.pass);
  CHECK(same.overflow);
  CHECK(same.power < 0);
  CHECK(same.line() == "FAIL overflow: the reference holds inf at [1] (run inf); the values left the element "
                       "type's range, so no tolerance can judge them");
  const Verdict per_element = compare("t", Tensor({inf, 1.0}), Tensor({inf, 1.0}), Tensor({inf, 0.0}));
  CHECK_FALSE(per_element.pass);
  CHECK(per_element.overflow);
  // The run alone overflowed: named as the run's.
  const Verdict run = compare("t", Tensor({2.0, -inf}), Tensor({2.0, 3.0}), 1e300);
  CHECK_FALSE(run.pass);
  CHECK(has(run.detail, "the sharded run holds -inf at [1] (reference 3)"));
  for (const Verdict& v : {compare("x", Tensor({inf}), Tensor({-inf}), 1e300), compare("x", Tensor({nan}), Tensor({nan}), 1.0),
                           compare("x", Tensor({0.0}), Tensor({nan}), Tensor({inf})),
                           compare("x", Tensor({nan}), Tensor({0.0}), Tensor({inf}))}) {
    CHECK_FALSE(v.pass);
    CHECK(v.overflow);
  }
  // A whole with an overflowed part overflowed.
  Verdict whole;
  absorb(whole, same, "t");
  CHECK(whole.overflow);
}

TEST_CASE("power: the smallest one-element error a check is sure to catch, times the RMS of its values") {
  const Tensor want = Tensor{{3.0, -4.0}, {0.0, 0.0}};  // RMS sqrt(25 / 4) = 2.5
  // exact: any wrong element is caught
  CHECK(compare("a", want, want).power == 0);
  // one tolerance 0.5, no error: an element off by more than 0.5 fails, 0.5 / 2.5 = 0.2
  const Verdict s = compare("a", want, want, 0.5);
  CHECK(s.power == doctest::Approx(0.2));
  CHECK(s.tol_over_value_max == doctest::Approx(0.5 / 3.0));  // over the nonzero values only
  // per element, with an error already used up: element 1 at tol 0.3 is off by 0.2 already, so a
  // further 0.5 against it might still pass; the sure catch is 0.3 + 0.2 = 0.5 there
  const Tensor tol = Tensor{{0.1, 0.3}, {0.0, 0.0}};
  const Tensor got = Tensor{{3.0, -3.8}, {0.0, 0.0}};
  const Verdict p = compare("a", got, want, tol);
  REQUIRE(p.pass);
  CHECK(p.power == doctest::Approx(0.5 / 2.5));
  CHECK(p.tol_over_value_max == doctest::Approx(0.3 / 4.0));
  CHECK(p.tol_over_value_median == doctest::Approx(0.3 / 4.0));  // the upper of two middles
  // What power promises, tried on every element both ways: an extra error just over power x RMS
  // fails the check wherever it lands. Against the error already there (element 1, downwards) it
  // must exceed tol + that error: a power without the error term would let this one pass.
  for (std::size_t i = 0; i < want.size(); ++i)
    for (double sign : {1.0, -1.0}) {
      Tensor bad = got;
      bad.data()[i] += sign * p.power * 2.5 * 1.001;
      CAPTURE(i);
      CAPTURE(sign);
      CHECK_FALSE(compare("a", bad, want, tol).pass);
    }
  // all-zero values under a nonzero tolerance: nothing to be relative to, so no power at all
  CHECK(std::isinf(compare("z", Tensor{{0.0, 0.0}}, Tensor{{0.0, 0.0}}, 1e-3).power));
}

TEST_CASE("power floors: float64 1e-9, float32 1e-3, bfloat16 3e-2; a whole is as weak as its weakest part") {
  CHECK(power_floor(DType::float64) == 1e-9);
  CHECK(power_floor(DType::float32) == 1e-3);
  CHECK(power_floor(DType::bfloat16) == 3e-2);
  Verdict whole;
  const Tensor want = Tensor{{1.0, -1.0}};
  absorb(whole, compare("a", want, want, 1e-4), "a");
  absorb(whole, compare("b", want, want, 2e-2), "b");
  CHECK(whole.power == doctest::Approx(2e-2));
  CHECK(whole.pass);
}
