// shardlab bench collectives under MPI (harness/bench/bench.cpp), in this process on every rank: MPICH's
// own call beside ours, the order alternating from one timed iteration to the next (ours_first
// counts what ran, the "# order:" header line says it), every timed call of both checked
// (--perturb-expected: every element of every call wrong), and the synchronisation timed apart.
// Any rank count: under -n 8 the group is all 8 ranks (timings then mean nothing; nothing here
// looks at them beyond > 0).
#include <doctest/doctest.h>

#include <string>

#include "collectives/mpi.hpp"
#include "harness/bench/bench.hpp"

using namespace shardlab;

namespace {

BenchOptions small(int iters) {
  BenchOptions o;
  o.backend = "mpi";
  o.min = "1K";
  o.max = "4K";
  o.iters = iters;
  o.warmup = 1;
  return o;
}

bool has_header(const BenchResult& r, const std::string& start) {
  for (const auto& h : r.header)
    if (h.rfind(start, 0) == 0) return true;
  return false;
}

}  // namespace

TEST_SUITE("mpi bench") {
  TEST_CASE("bench collectives --backend mpi: ours and MPICH's alternate which runs first; both verified on every call") {
    const int n = mpi::world_size();
    for (int iters : {3, 4}) {
      CAPTURE(iters);
      const BenchResult r = run_collectives_bench(small(iters));
      if (!mpi::is_root()) continue;  // rows are gathered on rank 0
      CHECK(r.native);
      CHECK(r.group_size == n);
      REQUIRE(r.rows.size() == 8);  // 1K and 4K, four ops
      CHECK(r.wrong() == 0);
      for (const auto& row : r.rows) {
        CAPTURE(row.op);
        CAPTURE(row.bytes);
        CHECK(row.ours_seconds > 0);
        CHECK(row.native_seconds > 0);
        CHECK(row.memcpy_seconds > 0);
        // Ours first at iterations 0, 2, ...: 2 of 3, 2 of 4. Always ours first would be 3 or 4,
        // always native first 0.
        CHECK(row.ours_first == (iters + 1) / 2);
      }
      CHECK(has_header(r, "order: ours ran first in " + std::to_string((iters + 1) / 2) + " of " +
                              std::to_string(iters) + " timed iterations per size"));
      CHECK(has_header(r, "sync: each timed call starts after an untimed meeting of the group"));
      CHECK(r.sync_seconds >= 0);
      const std::string csv = bench_csv(r);
      CHECK(csv.find(",ours_first,peer_memcpy_us,ours_over_peer_memcpy\n") != std::string::npos);
      // ours_first ends each row but for the two peer-copy fields, measured on sim only
      CHECK(csv.find("," + std::to_string((iters + 1) / 2) + ",-,-\n") != std::string::npos);
    }
  }

  TEST_CASE("bench collectives --backend mpi --perturb-expected: every element of every timed call, ours and MPICH's") {
    const int n = mpi::world_size();
    BenchOptions o = small(3);
    o.perturb_expected = true;
    const BenchResult r = run_collectives_bench(o);
    if (!mpi::is_root()) return;
    REQUIRE(r.rows.size() == 8);
    std::size_t total = 0;
    for (const auto& row : r.rows) {
      CAPTURE(row.op);
      CAPTURE(row.count);
      // 3 calls x n ranks x the elements of one rank's result (count/n for reduce_scatter).
      const std::size_t expected = 3 * std::size_t(n) * (row.op == "reduce_scatter" ? row.count / n : row.count);
      CHECK(row.ours_wrong == expected);
      CHECK(row.native_wrong == expected);
      total += 2 * expected;
    }
    CHECK(r.wrong() == total);
  }
}
