// GPT-3's split over D x P x T by formula: an axis of one device moves nothing; the numbers by hand.
#include <doctest/doctest.h>

#include "harness/models/three_d_gpt3.hpp"

using namespace shardlab;

TEST_SUITE("models") {
  TEST_CASE("gpt3_axes: bytes and calls by hand, nothing on an axis of one device") {
    const double act = 8.0 * 2048 * 12288 * 2;  // a micro-batch's activation in bfloat16
    const auto a = gpt3_axes(2, 4, 2);  // T, P, D; 24 layers a stage
    CHECK(a[0].calls == 32 * 24 * 4);
    CHECK(a[0].bytes == doctest::Approx(32 * 24 * 4 * act));  // 2(2-1)/2 of each
    CHECK(a[1].calls == 64);                                    // a middle stage sends both ways
    CHECK(a[1].bytes == doctest::Approx(64 * act));
    CHECK(a[2].bytes == doctest::Approx(12.0 * 12288 * 12288 * 24 / 2 * 2));  // 2 (D-1)/D of the shard
    for (const auto& one : {gpt3_axes(1, 1, 1), gpt3_axes(1, 1, 1, Gpt3Shape{})})
      for (const auto& x : one) {
        CHECK(x.calls == 0);
        CHECK(x.bytes == 0);
        CHECK(gpt3_axis_seconds(x, hardware_preset("ethernet-100g")) == 0);
      }
    CHECK(gpt3_keep_inside(gpt3_axes(1, 1, 1), hardware_preset("nvlink-a100"), hardware_preset("ethernet-100g")) == "");
    CHECK(gpt3_axes(2, 2, 1)[0].bytes == 0);
    CHECK(gpt3_axes(2, 1, 2)[1].bytes == 0);
  }

  TEST_CASE("gpt3_zero: ZeRO-2 (m+1)/2 and ZeRO-3 3m/2 times ZeRO-1's bytes; gradients 1/(P T)") {
    const Gpt3Zero z = gpt3_zero(4, 2, 4);
    CHECK(z.d_bytes[2] == doctest::Approx(16.5 * z.d_bytes[1]));
    CHECK(z.d_bytes[3] == doctest::Approx(48 * z.d_bytes[1]));
    CHECK(z.grads_here_gb == doctest::Approx(z.grads_whole_gb / 8));
    CHECK(z.grads_whole_gb == doctest::Approx(12.0 * 12288 * 12288 * 96 * 2 / 1e9));
    CHECK(gpt3_zero(1, 2, 4).d_bytes[3] == 0);
  }
}
