// harness/bench/calibrate.cpp: bench collectives --machine, the cost model beside what it predicts.
// Expected model times written out by hand from alpha-beta-gamma (ring all_reduce on p devices:
// 2(p-1) alpha + 2(p-1)/p n / link + (p-1)/p n / reduce; all_gather (p-1) alpha + (p-1)/p n / link),
// plus the launch of each call where the machine has one.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "harness/bench/calibrate.hpp"
#include "run_binary.hpp"

using namespace shardlab;
using namespace shardlab::testing;

namespace {

Hardware made_up() {
  Hardware hw;
  hw.name = "this-machine";
  hw.alpha = 1e-5;
  hw.bytes_per_s = 1e8;
  hw.reduce_bytes_per_s = 1e9;
  return hw;
}

BenchRow row(const std::string& op, std::size_t bytes, double seconds) {
  BenchRow r;
  r.op = op;
  r.bytes = bytes;
  r.ours_seconds = seconds;
  return r;
}

}  // namespace

TEST_CASE("model_rows: alpha-beta-gamma of each row, by hand; the summary over 1 MiB and up") {
  const double mib = 1 << 20;
  const double ar = 2 * 1e-5 + mib / 1e8 + 0.5 * mib / 1e9;  // all_reduce 1 MiB on 2 devices
  const double ag = 1e-5 + 4 * 0.5 * mib / 1e8;               // all_gather 4 MiB on 2 devices
  BenchResult r;
  r.group_size = 2;
  r.rows = {row("all_reduce", 64 * 1024, 1.0), row("all_reduce", 1 << 20, ar * 1.10), row("all_gather", 4 << 20, ag * 0.95),
            row("all_gather", 16 << 20, -1)};  // not timed: left out
  const std::vector<ModelRow> rows = model_rows(r, made_up());
  REQUIRE(rows.size() == 3);
  CHECK(rows[1].model == doctest::Approx(ar).epsilon(1e-12));
  CHECK(rows[2].model == doctest::Approx(ag).epsilon(1e-12));
  CHECK(rows[1].error() == doctest::Approx(0.1 / 1.1));
  CHECK(rows[2].error() == doctest::Approx(0.05 / 0.95));
  const ModelSummary s = model_summary(rows, 1 << 20);  // the 64 KiB row (error near 1) is below
  CHECK(s.rows == 2);
  CHECK(s.worst == "all_reduce 1M");
  CHECK(s.worst_error == doctest::Approx(0.1 / 1.1));
  CHECK(s.median_error == doctest::Approx((0.1 / 1.1 + 0.05 / 0.95) / 2));
  const std::string text = model_table(r, made_up(), "m.dat");
  CHECK(text.find("#   launch 0 us a call, alpha 10 us, link 0.1 GB/s") != std::string::npos);
  CHECK(text.find("median |error| 7%, worst 9% (all_reduce 1M) over 2 rows") != std::string::npos);
}

TEST_CASE("model_rows: a machine with a launch adds it once to every row") {
  Hardware hw = made_up();
  hw.launch = 30e-6;
  const double kib = 1024;
  BenchResult r;
  r.group_size = 4;
  r.rows = {row("all_reduce", 1024, 1e-3), row("all_gather", 1024, 1e-3), row("all_to_all", 1024, 1e-3)};
  const std::vector<ModelRow> rows = model_rows(r, hw);
  REQUIRE(rows.size() == 3);
  // 4 devices, 1 KiB: all_reduce 30 + 6 x 10 us + 2 x 3/4 KiB / link + 3/4 KiB / reduce.
  CHECK(rows[0].model == doctest::Approx(30e-6 + 6 * 1e-5 + 1.5 * kib / 1e8 + 0.75 * kib / 1e9).epsilon(1e-12));
  CHECK(rows[1].model == doctest::Approx(30e-6 + 3 * 1e-5 + 0.75 * kib / 1e8).epsilon(1e-12));
  CHECK(rows[2].model == doctest::Approx(30e-6 + 3 * 1e-5 + 0.75 * kib / 1e8).epsilon(1e-12));  // pairwise
  CHECK(model_table(r, hw, "m.dat").find("#   launch 30 us a call, alpha 10 us") != std::string::npos);
}

TEST_CASE("shardlab bench collectives --machine: the model table on sim; a missing file exits 2 before any run") {
  const std::string dat = std::filesystem::temp_directory_path() / ("shardlab_calibrate_" + std::to_string(::getpid()) + ".dat");
  std::ofstream(dat) << "# shardlab sweep --what machine: made up\n"
                        "# columns: 1 gemm_n, 2 gemm_GFLOPs, 3 reduce_B, 4 reduce_GBps, 5 alpha_us, 6 link_GBps, 7 fit_sizes, 8 fit_err_pct\n"
                        "     512        20.000   8388608       10.000     2.000      4.000         12         50.0\n";
  auto r = run_binary("shardlab bench collectives --ops all_reduce --min 512K --max 2M --factor 2 --iters 2 --warmup 0 --machine " + dat);
  CHECK(r.status == 0);
  CHECK(r.out.find("# the cost model of " + dat + ":\n#   launch 0 us a call, alpha 2 us, link 4 GB/s") != std::string::npos);
  CHECK(r.out.find("ours/model") != std::string::npos);
  CHECK(r.out.find("over 2 rows") != std::string::npos);  // 1M and 2M
  CHECK(r.out.find("#   ours: the median of 2 timed calls a size") != std::string::npos);
  // --statistic min (make cluster's 4 hosts on 2 cores): the fastest call, said in both headers.
  auto m = run_binary("shardlab bench collectives --ops all_reduce --min 1M --max 1M --iters 3 --warmup 0 --statistic min --machine " + dat);
  CHECK(m.status == 0);
  CHECK(m.out.find("#   ours: the fastest of 3 timed calls a size") != std::string::npos);
  CHECK(m.out.find("# time: us of each device's fastest call") != std::string::npos);
  auto mean = run_binary("shardlab bench collectives --statistic mean");
  CHECK(mean.status == 2);
  CHECK(count_lines(mean.err) == 1);
  auto bad = run_binary("shardlab bench collectives --machine /nonexistent/machine.dat");
  CHECK(bad.status == 2);
  CHECK(count_lines(bad.err) == 1);
  std::filesystem::remove(dat);
}
