// Element types against values worked out by hand from the IEEE formats: bfloat16 is the top 16 bits
// of a float32 (sign, 8 exponent bits, 7 stored fraction bits), rounded to nearest with ties to
// even. The expected bit patterns below come from writing the float32 bits out, not from the code.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"

using namespace shardlab;

namespace {
float float_of_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
std::uint32_t bits_of_float(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
std::uint16_t bf16_bits(float f) { return bfloat16(f).bits; }
// A bfloat16 from its bits, and its value, without the conversions under test.
bfloat16 bf16_from_bits(std::uint16_t b) {
  bfloat16 h;
  h.bits = b;
  return h;
}
double value_of_bits(std::uint16_t b) { return float_of_bits(static_cast<std::uint32_t>(b) << 16); }
bool is_nan_bits(std::uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x007fu) != 0; }

const DType kTypes[] = {DType::float32, DType::float64, DType::bfloat16};

// n values written as type t, encoded by hand (bfloat16: the value must be exact, its low 16 float
// bits zero, so the top half is the encoding).
std::vector<unsigned char> encode(DType t, const std::vector<double>& v) {
  std::vector<unsigned char> buf(v.size() * 8, 0xAB);
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (t == DType::float64) {
      std::memcpy(buf.data() + 8 * i, &v[i], 8);
    } else if (t == DType::float32) {
      const float f = static_cast<float>(v[i]);
      REQUIRE(static_cast<double>(f) == v[i]);
      std::memcpy(buf.data() + 4 * i, &f, 4);
    } else {
      const std::uint32_t u = bits_of_float(static_cast<float>(v[i]));
      REQUIRE((u & 0xffffu) == 0);
      const std::uint16_t b = static_cast<std::uint16_t>(u >> 16);
      std::memcpy(buf.data() + 2 * i, &b, 2);
    }
  }
  return buf;
}
double decode(DType t, const std::vector<unsigned char>& buf, std::size_t i) {
  if (t == DType::float64) {
    double d;
    std::memcpy(&d, buf.data() + 8 * i, 8);
    return d;
  }
  if (t == DType::float32) {
    float f;
    std::memcpy(&f, buf.data() + 4 * i, 4);
    return f;
  }
  std::uint16_t b;
  std::memcpy(&b, buf.data() + 2 * i, 2);
  return value_of_bits(b);
}
}  // namespace

TEST_SUITE("dtype") {
  TEST_CASE("bfloat16 is two bytes") {
    CHECK(sizeof(bfloat16) == 2);
  }

  TEST_CASE("bfloat16 from float: hand-computed bit patterns, ties to even") {
    CHECK(bf16_bits(1.0f) == 0x3F80);                        // 0x3F800000
    CHECK(bf16_bits(-2.0f) == 0xC000);                       // 0xC0000000
    CHECK(bf16_bits(0.15625f) == 0x3E20);                    // 0x3E200000 (1.25 * 2^-3)
    CHECK(bf16_bits(3.14159265f) == 0x4049);                 // 0x40490FDB: below the tie, truncates
    CHECK(bf16_bits(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);  // 0x3F808000: tie, 0x3F80 is even
    CHECK(bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);  // 0x3F818000: tie, 0x3F81 odd -> up
    CHECK(bf16_bits(float_of_bits(0x3F808001u)) == 0x3F81);  // one float ulp above the tie: up
    CHECK(bf16_bits(float_of_bits(0x3F807FFFu)) == 0x3F80);  // one float ulp below the tie: down
    CHECK(bf16_bits(float_of_bits(0xBF818000u)) == 0xBF82);  // negative tie, odd -> away from zero
    CHECK(bf16_bits(float_of_bits(0x3FFF8000u)) == 0x4000);  // tie at 0x3FFF (odd) carries into the exponent
  }

  TEST_CASE("bfloat16 from float: zeros, infinities, NaN, overflow, subnormals") {
    CHECK(bf16_bits(0.0f) == 0x0000);
    CHECK(bf16_bits(-0.0f) == 0x8000);
    CHECK(std::signbit(static_cast<float>(bfloat16(-0.0f))));
    CHECK(static_cast<float>(bfloat16(-0.0f)) == 0.0f);
    const float inf = std::numeric_limits<float>::infinity();
    CHECK(bf16_bits(inf) == 0x7F80);
    CHECK(bf16_bits(-inf) == 0xFF80);
    CHECK(static_cast<float>(bfloat16(inf)) == inf);
    // NaNs stay NaN, including those whose fraction bits are all in the low half (truncation would
    // give inf) and the all-ones one (rounding up would carry into the sign and give -0).
    for (std::uint32_t nan : {0x7FC00000u, 0x7F800001u, 0x7FFFFFFFu, 0xFFC00000u, 0xFF800001u, 0x7FBFFFFFu}) {
      CAPTURE(nan);
      const std::uint16_t b = bf16_bits(float_of_bits(nan));
      CHECK(is_nan_bits(b));
      CHECK(std::isnan(static_cast<float>(bfloat16(float_of_bits(nan)))));
      CHECK((b & 0x8000u) == ((nan >> 16) & 0x8000u));  // sign kept
    }
    CHECK(std::isnan(static_cast<float>(bfloat16(std::numeric_limits<float>::quiet_NaN()))));
    // The largest finite float, 0x7F7FFFFF, is past the tie above bfloat16's largest 0x7F7F: inf.
    CHECK(bf16_bits(FLT_MAX) == 0x7F80);
    CHECK(bf16_bits(-FLT_MAX) == 0xFF80);
    CHECK(bf16_bits(float_of_bits(0x7F7F7FFFu)) == 0x7F7F);  // just below the tie: the largest finite
    CHECK(bf16_bits(float_of_bits(0x7F7F8000u)) == 0x7F80);  // the tie itself, 0x7F7F odd: up to inf
    CHECK(value_of_bits(0x7F7F) == std::ldexp(255.0, 120));  // (2 - 2^-7) 2^127
    // Subnormal floats are a zero of their sign (no type holds subnormals, core/dtype.hpp); the
    // smallest normal, 2^-126, is bfloat16's too.
    CHECK(bf16_bits(float_of_bits(0x00000001u)) == 0x0000);
    CHECK(bf16_bits(float_of_bits(0x00018000u)) == 0x0000);
    CHECK(bf16_bits(float_of_bits(0x007FFFFFu)) == 0x0000);
    CHECK(bf16_bits(float_of_bits(0x80008000u)) == 0x8000);
    CHECK(bf16_bits(float_of_bits(0x00800000u)) == 0x0080);
  }

  TEST_CASE("bfloat16 to float is exact: the bits shifted up") {
    CHECK(static_cast<float>(bf16_from_bits(0x3F80)) == 1.0f);
    CHECK(static_cast<float>(bf16_from_bits(0x3F82)) == 1.015625f);  // 1 + 2^-6
    CHECK(static_cast<float>(bf16_from_bits(0x4049)) == 3.140625f);
    CHECK(static_cast<float>(bf16_from_bits(0xC2F7)) == -123.5f);    // -(1 + 119/128) 2^6
    CHECK(bits_of_float(static_cast<float>(bf16_from_bits(0x0001))) == 0x00010000u);  // bits, not a compare (DAZ)
    for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {  // every non-NaN bfloat16 survives a round trip,
      const std::uint16_t h = static_cast<std::uint16_t>(b);  // a subnormal as a zero of its sign
      if (is_nan_bits(h)) continue;
      const bool subnormal = (h & 0x7F80u) == 0;
      if (bf16_bits(static_cast<float>(bf16_from_bits(h))) != (subnormal ? (h & 0x8000u) : h)) {
        FAIL_CHECK("round trip changed bits " << b);
        break;
      }
    }
  }

  TEST_CASE("bfloat16 holds every integer up to 256 in magnitude, not 257") {
    for (int i = -256; i <= 256; ++i) {
      CAPTURE(i);
      REQUIRE(static_cast<float>(bfloat16(static_cast<float>(i))) == static_cast<float>(i));
    }
    // 257 = 256 (1 + 2^-8): a tie between 256 and 258, to even 256. 259 is a tie that goes to 260.
    CHECK(static_cast<float>(bfloat16(257.0f)) == 256.0f);
    CHECK(static_cast<float>(bfloat16(-257.0f)) == -256.0f);
    CHECK(static_cast<float>(bfloat16(259.0f)) == 260.0f);
    CHECK(static_cast<float>(bfloat16(258.0f)) == 258.0f);
  }

  TEST_CASE("parse_dtype takes the three names and rejects others naming the text") {
    CHECK(parse_dtype("float32") == DType::float32);
    CHECK(parse_dtype("float64") == DType::float64);
    CHECK(parse_dtype("bfloat16") == DType::bfloat16);
    for (const char* bad : {"float16", "Float32", "fp32", "", "float32 ", "bf16", "double"}) {
      const std::string text = bad;
      CAPTURE(text);
      bool threw = false;
      try {
        parse_dtype(text);
      } catch (const Error& e) {
        threw = true;
        CHECK(e.kind() == ErrorKind::parse);
        CHECK(std::string(e.what()).find("'" + text + "'") != std::string::npos);
        CHECK(std::string(e.what()).find('\n') == std::string::npos);
      }
      CHECK(threw);
    }
  }

  TEST_CASE("names, sizes and the one-line description") {
    for (DType t : kTypes) CHECK(parse_dtype(dtype_name(t)) == t);
    CHECK(dtype_name(DType::float32) == "float32");
    CHECK(dtype_name(DType::float64) == "float64");
    CHECK(dtype_name(DType::bfloat16) == "bfloat16");
    CHECK(element_bytes(DType::float32) == 4);
    CHECK(element_bytes(DType::float64) == 8);
    CHECK(element_bytes(DType::bfloat16) == 2);
    CHECK(element_bytes(DType::float32) == sizeof(float));
    CHECK(element_bytes(DType::float64) == sizeof(double));
    CHECK(element_bytes(DType::bfloat16) == sizeof(bfloat16));
    CHECK(dtype_text(DType::float32) == "float32, 4 B per element");
    CHECK(dtype_text(DType::float64) == "float64, 8 B per element");
    CHECK(dtype_text(DType::bfloat16) == "bfloat16, 2 B per element");
  }

  TEST_CASE("unit roundoff is half the machine epsilon; round_to rounds as the type stores") {
    CHECK(unit_roundoff(DType::float32) == FLT_EPSILON / 2);
    CHECK(unit_roundoff(DType::float64) == DBL_EPSILON / 2);
    CHECK(unit_roundoff(DType::bfloat16) == 1.0 / 256);  // 8 significant bits
    CHECK(smallest_normal(DType::float32) == FLT_MIN);
    CHECK(smallest_normal(DType::bfloat16) == FLT_MIN);  // float32's exponent range
    CHECK(smallest_normal(DType::float64) == DBL_MIN);
    CHECK(compute_roundoff(DType::bfloat16) == FLT_EPSILON / 2);
    CHECK(compute_roundoff(DType::float64) == DBL_EPSILON / 2);
    CHECK(round_to(DType::float64, 0.1) == 0.1);
    CHECK(round_to(DType::float32, 0.1) == static_cast<double>(0.1f));
    CHECK(round_to(DType::bfloat16, 257.0) == 256.0);
    CHECK(round_to(DType::bfloat16, 0.1) == value_of_bits(0x3DCD));  // 0.1f = 0x3DCCCCCD, above the tie
    // One rounding is within u of the value, for a double just above a bfloat16 tie too.
    for (double v : {0.1, 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40), 1e10 / 3, -7.77}) {
      CAPTURE(v);
      for (DType t : kTypes) CHECK(std::fabs(round_to(t, v) - v) <= unit_roundoff(t) * std::fabs(v));
    }
    // From double in one rounding, not two through float: 1 + 2^-8 + 2^-40 lies just above the
    // tie between 1.0 (0x3F80) and 1 + 2^-7 (0x3F81), so it rounds up; through float it would
    // first become 1 + 2^-8, the tie, and then go to even, 0x3F80.
    const double above_tie = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
    CHECK(round_to(DType::bfloat16, above_tie) == value_of_bits(0x3F81));
    CHECK(round_to(DType::bfloat16, -above_tie) == -value_of_bits(0x3F81));
    CHECK(round_to(DType::bfloat16, 1.0 + std::ldexp(1.0, -8)) == 1.0);  // the tie itself: to even
    CHECK(round_to(DType::bfloat16, 1.0 + 3 * std::ldexp(1.0, -8) - std::ldexp(1.0, -40)) == value_of_bits(0x3F81));
  }

  TEST_CASE("convert_elements between every pair of types on values all three hold exactly") {
    const std::vector<double> v = {0.0, 1.0, -2.5, 256.0, 0.15625, -1024.0, 3.0 * std::ldexp(1.0, -20)};
    for (DType from : kTypes)
      for (DType to : kTypes) {
        CAPTURE(dtype_name(from));
        CAPTURE(dtype_name(to));
        const auto src = encode(from, v);
        std::vector<unsigned char> dst(v.size() * 8 + 8, 0xCD);
        convert_elements(from, src.data(), to, dst.data(), v.size());
        for (std::size_t i = 0; i < v.size(); ++i) CHECK(decode(to, dst, i) == v[i]);
        // Nothing past the n elements is written.
        for (std::size_t b = v.size() * element_bytes(to); b < dst.size(); ++b) REQUIRE(dst[b] == 0xCD);
      }
  }

  TEST_CASE("convert_elements rounds when the target is narrower, and keeps inf and NaN") {
    const double inf = std::numeric_limits<double>::infinity();
    // float64 -> float32: 0.1 to the nearest float, 1e300 overflows, 2^24 + 1 ties to even 2^24.
    {
      const std::vector<double> v = {0.1, 1e300, 16777217.0, -inf};
      std::vector<float> out(v.size());
      convert_elements(DType::float64, v.data(), DType::float32, out.data(), v.size());
      CHECK(out[0] == 0.1f);
      CHECK(out[1] == std::numeric_limits<float>::infinity());
      CHECK(out[2] == 16777216.0f);
      CHECK(out[3] == -std::numeric_limits<float>::infinity());
    }
    // float64 and float32 -> bfloat16: 257 ties to 256, 1 + 3 2^-8 ties up, 0.1 and 1e300.
    {
      const std::vector<double> v = {257.0, 1.0 + 3 * std::ldexp(1.0, -8), 0.1, 1e300, std::nan("")};
      std::vector<std::uint16_t> out(v.size());
      convert_elements(DType::float64, v.data(), DType::bfloat16, out.data(), v.size());
      CHECK(out[0] == 0x4380);  // 256 = 0x43800000
      CHECK(out[1] == 0x3F82);
      CHECK(out[2] == 0x3DCD);
      CHECK(out[3] == 0x7F80);
      CHECK(is_nan_bits(out[4]));
      const std::vector<float> f = {257.0f, 259.0f, float_of_bits(0x3F808001u), -0.0f};
      std::vector<std::uint16_t> g(f.size());
      convert_elements(DType::float32, f.data(), DType::bfloat16, g.data(), f.size());
      CHECK(g[0] == 0x4380);
      CHECK(g[1] == 0x4382);  // 260 = 1.015625 * 2^8
      CHECK(g[2] == 0x3F81);
      CHECK(g[3] == 0x8000);
    }
    // bfloat16 -> wider types is exact, inf and NaN included, down to the smallest normal 2^-126
    // (no rounding makes a subnormal, core/dtype.hpp, and under DAZ one would read as zero).
    {
      const std::vector<std::uint16_t> h = {0x3F82, 0xFF80, 0x7FC1, 0x0080};
      std::vector<double> d(h.size());
      std::vector<float> f(h.size());
      convert_elements(DType::bfloat16, h.data(), DType::float64, d.data(), h.size());
      convert_elements(DType::bfloat16, h.data(), DType::float32, f.data(), h.size());
      CHECK(d[0] == 1.015625);
      CHECK(d[1] == -inf);
      CHECK(std::isnan(d[2]));
      CHECK(d[3] == std::ldexp(1.0, -126));
      CHECK(f[0] == 1.015625f);
      CHECK(std::isinf(f[1]));
      CHECK(std::isnan(f[2]));
      CHECK(bits_of_float(f[3]) == 0x00800000u);
    }
  }

  TEST_CASE("add_into adds elementwise in each type, rounding to that type") {
    {  // float64: 2^53 + 1 ties to even 2^53; 0.1 + 0.2 is the double next above 0.3
      std::vector<double> acc = {1.0, std::ldexp(1.0, 53), 0.1, 7.0};
      const std::vector<double> in = {2.0, 1.0, 0.2, 100.0};
      add_into(DType::float64, acc.data(), in.data(), 3);
      CHECK(acc[0] == 3.0);
      CHECK(acc[1] == std::ldexp(1.0, 53));
      CHECK(acc[2] == 0.30000000000000004);
      CHECK(acc[3] == 7.0);  // past n: untouched
    }
    {  // float32: 2^24 + 1 ties to even 2^24; 2^24 + 3 ties up to 2^24 + 4
      std::vector<float> acc = {1.5f, 16777216.0f, 16777216.0f, -4.0f};
      const std::vector<float> in = {-0.25f, 1.0f, 3.0f, 100.0f};
      add_into(DType::float32, acc.data(), in.data(), 3);
      CHECK(acc[0] == 1.25f);
      CHECK(acc[1] == 16777216.0f);
      CHECK(acc[2] == 16777220.0f);
      CHECK(acc[3] == -4.0f);
    }
    {  // bfloat16: added in float, rounded back. 256 + 1 = 257 ties to 256; 256 + 3 ties up to 260;
       // 255 + 2 = 257 -> 256; 1 + 2^-8 -> 1; (1 + 2^-7) + 2^-8 -> 1 + 2^-6; 1 + 1 = 2.
      auto b = [](double x) {  // exact encodings, by hand
        const std::uint32_t u = bits_of_float(static_cast<float>(x));
        REQUIRE((u & 0xffffu) == 0);
        return static_cast<std::uint16_t>(u >> 16);
      };
      std::vector<std::uint16_t> acc = {b(256), b(256), b(255), b(1), b(1 + 1.0 / 128), b(1), b(-3), b(42)};
      const std::vector<std::uint16_t> in = {b(1), b(3), b(2), b(1.0 / 256), b(1.0 / 256), b(1), b(1.5), b(1)};
      add_into(DType::bfloat16, acc.data(), in.data(), 7);
      CHECK(value_of_bits(acc[0]) == 256.0);
      CHECK(value_of_bits(acc[1]) == 260.0);
      CHECK(value_of_bits(acc[2]) == 256.0);
      CHECK(value_of_bits(acc[3]) == 1.0);
      CHECK(acc[4] == 0x3F82);
      CHECK(value_of_bits(acc[5]) == 2.0);
      CHECK(value_of_bits(acc[6]) == -1.5);
      CHECK(value_of_bits(acc[7]) == 42.0);  // past n: untouched
      // Adding 1 to 256 a hundred times in bfloat16 never moves it; in float32 it reaches 356.
      std::uint16_t s = b(256), one = b(1);
      float f = 256.0f, fone = 1.0f;
      for (int i = 0; i < 100; ++i) {
        add_into(DType::bfloat16, &s, &one, 1);
        add_into(DType::float32, &f, &fone, 1);
      }
      CHECK(value_of_bits(s) == 256.0);
      CHECK(f == 356.0f);
    }
  }
  TEST_CASE("add_elements writes a + b to a third buffer and leaves both operands alone") {
    const std::vector<float> a = {1.5f, 16777216.0f, -2.0f};
    const std::vector<float> b = {0.25f, 3.0f, 2.0f};
    std::vector<float> out = {9.0f, 9.0f, 9.0f, 9.0f};
    add_elements(DType::float32, out.data(), a.data(), b.data(), 3);
    CHECK(out == std::vector<float>{1.75f, 16777220.0f, 0.0f, 9.0f});
    CHECK(a == std::vector<float>{1.5f, 16777216.0f, -2.0f});
    CHECK(b == std::vector<float>{0.25f, 3.0f, 2.0f});
    // bfloat16 rounds once, as add_into does: 256 + 3 ties up to 260 (0x4382).
    const std::uint16_t x = 0x4380, y = 0x4040;  // 256, 3
    std::uint16_t z = 0;
    add_elements(DType::bfloat16, &z, &x, &y, 1);
    CHECK(z == 0x4382);
    CHECK(x == 0x4380);
  }
}
