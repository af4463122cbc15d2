// harness/models/zero.cpp: memory per device of plain DP and ZeRO 1-3 against the ZeRO paper's
// headline example (7.5B parameters, 64 devices, mixed-precision Adam: 120, 31.4, 16.6 and 1.9
// GB), and bytes per step (ZeRO-3 1.5x the others); parameter counts parsed or refused.
#include <doctest/doctest.h>

#include "core/error.hpp"
#include "harness/models/zero.hpp"

using namespace shardlab;

TEST_CASE("zero: the ZeRO paper's 7.5B parameters on 64 devices") {
  const auto s = zero_stages(7.5e9, 64, "adam");
  REQUIRE(s.size() == 4);
  CHECK(s[0].memory_bytes() == doctest::Approx(120e9));            // 16 x 7.5e9
  CHECK(s[1].memory_bytes() == doctest::Approx(30e9 + 12 * 7.5e9 / 64));  // 31.4 GB
  CHECK(s[2].memory_bytes() == doctest::Approx(15e9 + 14 * 7.5e9 / 64));  // 16.6 GB
  CHECK(s[3].memory_bytes() == doctest::Approx(16 * 7.5e9 / 64));         // 1.9 GB
  CHECK(s[1].memory_bytes() / 1e9 == doctest::Approx(31.4).epsilon(0.002));
  CHECK(s[2].memory_bytes() / 1e9 == doctest::Approx(16.6).epsilon(0.003));
  // Per step: an AllReduce of the 2-byte gradients, 2 (D-1)/D of them; ZeRO-3 1.5 times that.
  CHECK(s[0].sent_bytes == doctest::Approx(2.0 * 63 / 64 * 15e9));
  CHECK(s[1].sent_bytes == s[0].sent_bytes);
  CHECK(s[2].sent_bytes == s[0].sent_bytes);
  CHECK(s[3].sent_bytes == doctest::Approx(1.5 * s[0].sent_bytes));
  // SGD with momentum keeps 8 bytes of state: plain DP holds 12 bytes per parameter.
  CHECK(zero_stages(1e9, 8, "sgd")[0].memory_bytes() == doctest::Approx(12e9));
  CHECK_THROWS_AS(zero_stages(1e9, 8, "lion"), Error);
}

TEST_CASE("zero: parameter counts with K, M, B and T, or refused in one sentence") {
  CHECK(parse_param_count("7.5B", "--params") == doctest::Approx(7.5e9));
  CHECK(parse_param_count("350M", "--params") == doctest::Approx(3.5e8));
  CHECK(parse_param_count("1e9", "--params") == doctest::Approx(1e9));
  for (const char* bad : {"", "0", "-1B", "abc", "7.5X", "B", "nan", "inf", "1e20"})
    CHECK_THROWS_AS(parse_param_count(bad, "--params"), Error);
}

// Issue 32: P = 5 parameters on 4 devices. chunk: parts 2, 2, 1, 0 (torch.chunk); pad: 2 each.
// The busiest device holds 2; one ring ReduceScatter or AllGather sends every part but one: all
// 5 (chunk: the empty part is the one skipped) or 3 padded parts of 2 (pad), 2 bytes each.
TEST_CASE("zero --uneven: 5 parameters on 4 devices, chunk and pad; none refuses") {
  const auto chunk = zero_stages(5, 4, "adam", Uneven::chunk), pad = zero_stages(5, 4, "adam", Uneven::pad);
  for (const auto* s : {&chunk, &pad}) {
    CHECK((*s)[0].memory_bytes() == 16 * 5);
    CHECK((*s)[1].state_bytes == 12 * 2);
    CHECK((*s)[2].grad_bytes == 2 * 2);
    CHECK((*s)[3].memory_bytes() == 16 * 2);
  }
  CHECK(chunk[0].sent_bytes == 2 * 5 * 2);  // ReduceScatter + AllGather (or one AllReduce)
  CHECK(chunk[3].sent_bytes == 3 * 5 * 2);
  CHECK(pad[0].sent_bytes == 2 * 3 * 2 * 2);
  CHECK(pad[3].sent_bytes == 3 * 3 * 2 * 2);
  // Dividing counts are the same under every rule.
  CHECK(zero_stages(12, 4, "adam", Uneven::pad)[3].sent_bytes == zero_stages(12, 4, "adam", Uneven::none)[3].sent_bytes);
  CHECK_THROWS_AS(zero_stages(5, 4, "adam", Uneven::none), Error);
}
