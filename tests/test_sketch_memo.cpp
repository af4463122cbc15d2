// harness/check/sketch_memo.cpp: fingerprints, the SketchReuse scope, and sketch_product reusing a
// reference side only for operands equal bit for bit. Expected verdicts come from the same check
// run with nothing kept, and from products computed here by plain loops.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "harness/check/sketch.hpp"
#include "harness/check/sketch_memo.hpp"

using namespace shardlab;

namespace {

struct Mat {
  std::size_t rows, cols;
  std::vector<float> data = std::vector<float>(rows * cols);
  MatRef<float> ref() const { return {data.data(), rows, cols}; }
};

Mat random_mat(std::size_t rows, std::size_t cols, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Mat m{rows, cols};
  for (auto& x : m.data) x = static_cast<float>(static_cast<double>(rng() >> 11) * 0x1.0p-53 * 2 - 1);
  return m;
}

// C = A B, each element summed in float left to right.
Mat product(const Mat& a, const Mat& b) {
  Mat c{a.rows, b.cols};
  for (std::size_t i = 0; i < a.rows; ++i)
    for (std::size_t j = 0; j < b.cols; ++j) {
      float acc = 0;
      for (std::size_t l = 0; l < a.cols; ++l) acc += a.data[i * a.cols + l] * b.data[l * b.cols + j];
      c.data[i * c.cols + j] = acc;
    }
  return c;
}

// The check as the FFN's stages ask it: projections, sampled rows and the float32 calibration.
Verdict check(const Mat& c, const Mat& a, const Mat& b) {
  return sketch_product<float>("C", c.ref(), a.ref(), b.ref(),
                               {.gamma = sum_gamma(a.cols, float_unit_roundoff), .vectors = 20, .seed = 5,
                                .rows = 8, .one_in = 4, .calibrate_group = 1});
}

void same_verdict(const Verdict& got, const Verdict& want) {
  CHECK(got.pass == want.pass);
  CHECK(got.max_abs_error == want.max_abs_error);
  CHECK(got.tolerance == want.tolerance);
  CHECK(got.power == want.power);
  CHECK(got.detail == want.detail);
}

}  // namespace

TEST_CASE("fingerprint: 32 hex digits; one flipped bit or one byte more changes it") {
  std::vector<unsigned char> bytes(1000, 7);
  const std::string f = fingerprint(bytes.data(), bytes.size());
  CHECK(f.size() == 32);
  CHECK(f.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(fingerprint(bytes.data(), bytes.size()) == f);
  bytes[500] ^= 1;
  CHECK(fingerprint(bytes.data(), bytes.size()) != f);
  bytes[500] ^= 1;
  CHECK(fingerprint(bytes.data(), bytes.size() - 1) != f);
}

TEST_CASE("sketch memo: kept only while a SketchReuse is alive, oldest dropped past kEntries") {
  const auto one = std::make_shared<const int>(1);
  sketch_memo::keep("outside", one, sizeof(int));
  CHECK_FALSE(sketch_memo::active());
  CHECK(sketch_memo::find("outside") == nullptr);
  {
    const SketchReuse reuse;
    CHECK(sketch_memo::active());
    CHECK(sketch_memo::find("outside") == nullptr);
    const std::size_t hits = sketch_memo::hits();
    sketch_memo::keep("k0", one, sizeof(int));
    CHECK(sketch_memo::find("k0") == one);
    CHECK(sketch_memo::hits() == hits + 1);
    {
      const SketchReuse inner;  // nested scopes share one memo
      CHECK(sketch_memo::find("k0") == one);
    }
    CHECK(sketch_memo::find("k0") == one);  // the outer scope still holds it
    for (std::size_t i = 1; i <= sketch_memo::kEntries; ++i)
      sketch_memo::keep("k" + std::to_string(i), one, sizeof(int));
    CHECK(sketch_memo::find("k0") == nullptr);  // the oldest, dropped
    CHECK(sketch_memo::find("k1") == one);
    sketch_memo::keep("huge", one, sketch_memo::kBytes + 1);
    CHECK(sketch_memo::find("huge") == nullptr);
  }
  CHECK_FALSE(sketch_memo::active());
  const SketchReuse again;
  CHECK(sketch_memo::find("k1") == nullptr);  // freed when the last scope ended
}

TEST_CASE("sketch_product under SketchReuse: the same verdicts, a reference reused for equal operands only") {
  const Mat a = random_mat(24, 300, 1), b = random_mat(300, 16, 2);
  const Mat c = product(a, b);
  Mat wrong = c;
  wrong.data[5 * wrong.cols + 3] += 0.01f;
  const Verdict honest = check(c, a, b), bad = check(wrong, a, b);  // nothing kept
  REQUIRE(honest.pass);
  REQUIRE_FALSE(bad.pass);

  const SketchReuse reuse;
  const std::size_t hits = sketch_memo::hits();
  same_verdict(check(c, a, b), honest);  // computes and keeps the reference side
  CHECK(sketch_memo::hits() == hits);
  same_verdict(check(c, a, b), honest);  // a second layout's equal result: looked up
  same_verdict(check(wrong, a, b), bad);  // a wrong result still fails against the kept side
  CHECK(sketch_memo::hits() == hits + 2);

  // B changed in one element: a key of its own. A C that is A times the old B must fail (a
  // reference kept for the old B would pass it), and the honest product with the new B pass.
  Mat b2 = b;
  b2.data[7 * b2.cols + 2] += 0.5f;
  const Verdict stale = check(c, a, b2);
  CHECK_FALSE(stale.pass);
  CHECK(check(product(a, b2), a, b2).pass);
  // A changed likewise.
  Mat a2 = a;
  a2.data[3 * a2.cols + 100] -= 0.5f;
  CHECK_FALSE(check(c, a2, b).pass);
  CHECK(check(product(a2, b), a2, b).pass);
  CHECK(sketch_memo::hits() == hits + 4);  // each new pair computed once, then found once
}
