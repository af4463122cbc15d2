// shardlab bench memory: every strategy asked for gets a row, each step verified, the ratio column
// is the two timing columns divided, and bad input is exit 2. (Which mode is faster is the
// benchmark's to print, not a test's to assert: timings on a shared machine are not reproducible.)
#include <doctest/doctest.h>

#include <malloc.h>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "harness/models/bench_memory.hpp"
#include "run_binary.hpp"

using namespace shardlab;
using namespace shardlab::testing;

TEST_CASE("shardlab bench memory --json: a verified row per strategy, ratio = released / kept") {
  const auto r = run_binary("shardlab bench memory --dims B=4,S=2,M=8,H=16 --iters 1 --strategies gspmd,data --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["rows"].size() == 2);
  CHECK(j["rows"][0]["strategy"] == "gspmd");
  CHECK(j["rows"][0]["mesh"] == "X=2,Y=4");
  CHECK(j["rows"][1]["mesh"] == "X=4");
  for (const auto& row : j["rows"]) {
    const double released = row["released_seconds"], kept = row["kept_seconds"];
    CHECK(released > 0);
    CHECK(kept > 0);
    CHECK(row["released_over_kept"].get<double>() == doctest::Approx(released / kept));
    CHECK(row["pass"] == true);
  }
  CHECK(j["pass"] == true);
  CHECK(j["blas"].get<std::string>().find("kernels:") != std::string::npos);

  const auto text = run_binary("shardlab bench memory --dims B=4,S=2,M=8,H=16 --iters 1 --strategies pairwise");
  REQUIRE(text.status == 0);
  CHECK(text.out.find("released/kept") != std::string::npos);
  CHECK(text.out.find("\nbench memory: released/kept ") != std::string::npos);  // the verdict line
}

TEST_CASE("shardlab bench memory: bad input is exit 2 with one sentence") {
  for (const std::string args : {"--strategies gspmd,bogus", "--iters 0", "--dims B=3,S=2,M=8,H=16",
                                 "--dims B=4,S=oops"}) {
    CAPTURE(args);
    const auto r = run_binary("shardlab bench memory " + args);
    CHECK(r.status == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.out.empty());
  }
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
TEST_CASE("run_memory_bench leaves freed memory kept, as a Runtime does") {
  MemoryBenchOptions o;
  o.dims = "B=4,S=2,M=8,H=16";
  o.strategies = "pairwise";
  o.iters = 1;
  REQUIRE(run_memory_bench(o).size() == 1);
  const long before = static_cast<long>(mallinfo2().hblkhd);
  char* volatile p = static_cast<char*>(std::malloc(8 << 20));
  p[0] = 1;
  CHECK(static_cast<long>(mallinfo2().hblkhd) - before == 0);  // from the heap: not mapped on its own
  std::free(p);
}
#endif
