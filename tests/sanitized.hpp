// Whether this test binary is a sanitizer build (make sanitize), and how much a test repeats there.
//
// Under ThreadSanitizer or ASan+UBSan a test runs 5-15 times slower than in the normal build, and
// the programs it starts run sanitized too. A sanitizer finding depends on which code paths a run
// takes, not on how many random cases take them: so a test that repeats one path over many random
// cases, seeds or lessons runs a smaller share of them there (each test says which), still taking
// every path; the normal build (make test) runs them all and checks their counts.
#pragma once

namespace shardlab::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
// ThreadSanitizer's suite (make sanitize) looks for data races: where threads meet, not what a
// command prints. The slowest tests that only check a command's output, through a shardlab
// process whose sim threads run the runtime and collectives its suite race-checks in-process, are
// skipped there (doctest::skip(kThreadSanitized), four of them); ASan+UBSan and make test run them.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitized = true;
#else
inline constexpr bool kThreadSanitized = false;
#endif

// `n` in the normal build; in a sanitizer build n / `share` (at least 1).
constexpr int sanitized_share(int n, int share) { return kSanitized ? (n / share > 0 ? n / share : 1) : n; }

}  // namespace shardlab::testing
