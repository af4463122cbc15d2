// shardlab bench collectives (harness/bench/bench.cpp) on the sim backend: the memcpy column and the
// ours/memcpy ratio are there, positive and computed from the bytes one device sends; #wrong counts
// every element of every timed call (--perturb-expected makes all of them wrong); the table keeps
// within 100 columns on both backends; the CSV carries the new columns and still reads back as a
// bench CSV (shardlab sweep --bench-csv). Timings are printed, never asserted: this machine is shared.
// The MPI side (MPICH's call, the alternating order) is in tests/mpi/test_mpi_bench.cpp.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "core/text.hpp"
#include "core/error.hpp"
#include "harness/bench/bench.hpp"
#include "harness/models/sweep.hpp"
#include "run_binary.hpp"

using namespace shardlab;
using namespace shardlab::testing;

namespace {

// A small, quick run: sizes 1K and 8K, 3 timed calls after 1 warm-up.
BenchOptions small(const std::string& mesh = "X=2") {
  BenchOptions o;
  o.mesh = mesh;
  o.min = "1K";
  o.max = "8K";
  o.factor = 8;
  o.iters = 3;
  o.warmup = 1;
  o.dtype = "float64";  // the hand counts below are in 8-byte elements
  return o;
}

// Elements one device's result holds: count/n for reduce_scatter, count for the others.
std::size_t elements(const BenchRow& r, int n) { return r.op == "reduce_scatter" ? r.count / n : r.count; }

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The data rows of a printed table or CSV: not comments, not blank, not the column titles.
std::vector<std::vector<std::string>> data_rows(const std::string& text, char sep) {
  std::vector<std::vector<std::string>> out;
  for (const auto& l : lines(text)) {
    if (l.empty() || l[0] == '#' || l.rfind("collective", 0) == 0) continue;
    std::vector<std::string> f;
    if (sep == ',') {
      f = split(l, ',');
    } else {
      std::istringstream in(l);
      for (std::string w; in >> w;) f.push_back(w);
    }
    out.push_back(f);
  }
  return out;
}

std::vector<std::string> columns_of(const std::string& table) {
  for (const auto& l : lines(table))
    if (l.rfind("collective", 0) == 0) {
      std::vector<std::string> f;
      std::istringstream in(l);
      for (std::string w; in >> w;) f.push_back(w);
      return f;
    }
  return {};
}

std::size_t index_of(const std::vector<std::string>& v, const std::string& name) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] == name) return i;
  return v.size();
}

bool has_line_starting(const std::string& text, const std::string& start) {
  for (const auto& l : lines(text))
    if (l.rfind(start, 0) == 0) return true;
  return false;
}

}  // namespace

TEST_CASE("bench collectives: bytes sent per device, as the memcpy column copies them") {
  // 1 MiB = 131072 doubles. Ring all_reduce sends 2(n-1) chunks of count/n, the others n-1.
  CHECK(bytes_sent_per_device("all_reduce", 2, 131072, 8) == 1048576);            // 2(1)/2 x 1 MiB
  CHECK(bytes_sent_per_device("all_gather", 2, 131072, 8) == 524288);             // (1)/2 x 1 MiB
  CHECK(bytes_sent_per_device("reduce_scatter", 4, 131072, 8) == 786432);         // 3/4 x 1 MiB
  CHECK(bytes_sent_per_device("all_to_all", 8, 131072, 8) == 7 * 16384 * 8);      // 7/8 x 1 MiB
  CHECK(bytes_sent_per_device("all_reduce", 4, 131072, 8) == 2 * 3 * 32768 * 8);  // 6/4 x 1 MiB
  CHECK(bytes_sent_per_device("all_gather", 1, 131072, 8) == 0);                  // a group of one sends nothing
  // The same as busbw's factor times the size, wherever n divides the count.
  for (const std::string op : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"})
    for (int n : {2, 3, 4, 8}) {
      CAPTURE(op);
      CAPTURE(n);
      const std::size_t count = 24 * 1024;
      CHECK(double(bytes_sent_per_device(op, n, count, 8)) == doctest::Approx(bus_factor(op, n) * count * 8));
    }
}

TEST_CASE("bench collectives on sim: a memcpy column and ours/memcpy for every row, positive, in table and CSV") {
  const BenchResult r = run_collectives_bench(small());
  REQUIRE(r.rows.size() == 8);  // 4 ops x 2 sizes
  CHECK(r.wrong() == 0);
  CHECK(!r.native);
  CHECK(r.iters == 3);
  for (const auto& row : r.rows) {
    CAPTURE(row.op);
    CAPTURE(row.bytes);
    CHECK(row.ours_seconds > 0);
    CHECK(row.memcpy_seconds > 0);
    CHECK(row.memcpy_bytes == bytes_sent_per_device(row.op, 2, row.count, 8));
    CHECK(row.memcpy_bytes == (row.op == "all_reduce" ? row.bytes : row.bytes / 2));  // n = 2
    CHECK(row.peer_memcpy_seconds > 0);
    CHECK(row.native_seconds < 0);  // no native side on sim
    CHECK(row.ours_first == -1);
  }
  CHECK(r.sync_seconds >= 0);

  const std::string table = bench_table(r);
  CHECK(has_line_starting(table, "# memcpy_us: median us of one std::memcpy of the bytes a device sends"));
  CHECK(has_line_starting(table, "# sync: each timed call starts after an untimed meeting"));
  const auto cols = columns_of(table);
  const std::size_t mc = index_of(cols, "memcpy_us"), ratio = index_of(cols, "ours/memcpy"),
                    ours = index_of(cols, "ours_us");
  REQUIRE(mc < cols.size());
  REQUIRE(ratio < cols.size());
  const std::size_t peer = index_of(cols, "peer_us"), peer_ratio = index_of(cols, "ours/peer");
  REQUIRE(peer_ratio < cols.size());
  CHECK(index_of(cols, "native_us") == cols.size());  // sim: ours beside memcpy, no native columns
  const auto rows = data_rows(table, ' ');
  REQUIRE(rows.size() == r.rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CAPTURE(table);
    REQUIRE(rows[i].size() == cols.size());
    CHECK(rows[i][mc] != "-");
    CHECK(std::stod(rows[i][mc]) >= 0);  // printed with 2 decimals: a 1 KiB copy may show 0.0x
    CHECK(std::stod(rows[i][ratio]) > 0);
    CHECK(std::stod(rows[i][ratio]) == doctest::Approx(r.rows[i].ours_seconds / r.rows[i].memcpy_seconds).epsilon(0.01));
    CHECK(std::stod(rows[i][ours]) > 0);
    CHECK(std::stod(rows[i][peer_ratio]) ==
          doctest::Approx(r.rows[i].ours_seconds / r.rows[i].peer_memcpy_seconds).epsilon(0.01));
    CHECK(std::stod(rows[i][peer]) >= 0);
  }

  const std::string csv = bench_csv(r);
  CHECK(csv.find("# memcpy_us: median us of one std::memcpy") != std::string::npos);
  const std::string names =
      "# collective,size_bytes,count,ours_us,ours_algbw,ours_busbw,ours_wrong,native_us,native_algbw,native_busbw,"
      "native_wrong,ours_over_native,memcpy_bytes,memcpy_us,ours_over_memcpy,ours_first,peer_memcpy_us,"
      "ours_over_peer_memcpy";
  CHECK(csv.find("\n" + names + "\n") != std::string::npos);
  const auto fields = data_rows(csv, ',');
  REQUIRE(fields.size() == r.rows.size());
  for (std::size_t i = 0; i < fields.size(); ++i) {
    REQUIRE(fields[i].size() == 18);
    CHECK(std::stoull(fields[i][12]) == r.rows[i].memcpy_bytes);
    CHECK(std::stod(fields[i][13]) >= 0);
    CHECK(std::stod(fields[i][14]) > 0);
    CHECK(fields[i][15] == "-");  // ours_first: no native on sim
  }
  // shardlab sweep --bench-csv still reads it.
  const BenchResult back = parse_bench_csv(csv, "bench.csv");
  CHECK(back.group_size == 2);
  REQUIRE(back.rows.size() == r.rows.size());
  CHECK(back.rows[3].bytes == r.rows[3].bytes);
}

TEST_CASE("bench collectives --perturb-expected: #wrong counts every element of every timed call") {
  for (const std::string mesh : {"X=2", "X=3"}) {
    CAPTURE(mesh);
    const int n = mesh == "X=2" ? 2 : 3;
    BenchOptions o = small(mesh);
    o.perturb_expected = true;
    const BenchResult bad = run_collectives_bench(o);
    REQUIRE(bad.rows.size() == 8);
    std::size_t total = 0;
    for (const auto& row : bad.rows) {
      CAPTURE(row.op);
      CAPTURE(row.count);
      // iters timed calls x n devices x the elements of one device's result, every one of them off
      const std::size_t expected = std::size_t(o.iters) * n * elements(row, n);
      CHECK(row.ours_wrong == expected);
      CHECK(row.native_wrong == 0);
      total += expected;
    }
    CHECK(bad.wrong() == total);
    // By hand for X=2, 1 KiB all_reduce: 128 doubles on each of 2 devices, 3 calls: 768.
    if (n == 2) CHECK(bad.rows[0].ours_wrong == 768);

    o.perturb_expected = false;
    CHECK(run_collectives_bench(o).wrong() == 0);
  }
}

TEST_CASE("bench collectives in float32 and bfloat16: count = bytes / element size, exact values, every wrong one counted") {
  // X=15 is the largest group whose bfloat16 values stay exact (sums up to n(n-1)/2 + 4n = 165,
  // all_to_all values up to 16n - 1 = 239); X=16 is refused.
  for (const std::string dtype : {"float32", "bfloat16"}) {
    for (const std::string mesh : {"X=3", "X=15"}) {
      CAPTURE(dtype);
      CAPTURE(mesh);
      const int n = mesh == "X=3" ? 3 : 15;
      const std::size_t eb = dtype == "float32" ? 4 : 2;
      BenchOptions o = small(mesh);
      o.dtype = dtype;
      o.min = o.max = "8K";
      o.iters = 1;
      o.warmup = 0;
      const BenchResult r = run_collectives_bench(o);
      REQUIRE(r.rows.size() == 4);
      CHECK(r.wrong() == 0);
      for (const auto& row : r.rows) {
        CHECK(row.count == 8192 / eb / n * n);
        CHECK(row.bytes == row.count * eb);
        CHECK(row.memcpy_bytes == bytes_sent_per_device(row.op, n, row.count, eb));
      }
      o.perturb_expected = true;
      const BenchResult bad = run_collectives_bench(o);
      for (const auto& row : bad.rows) CHECK(row.ours_wrong == std::size_t(n) * elements(row, n));
    }
  }
  BenchOptions o = small("X=16");
  o.dtype = "bfloat16";
  CHECK_THROWS_AS(run_collectives_bench(o), shardlab::Error);
}

TEST_CASE("shardlab bench collectives on sim: the memcpy column in the binary's table and CSV; perturbed, exit 1") {
  const std::string csv = "/tmp/shardlab_test_bench_" + std::to_string(::getpid()) + ".csv";
  const auto ok = run_binary("shardlab bench collectives --max 4K --iters 2 --warmup 0 --csv " + csv);
  CHECK(ok.status == 0);
  CHECK(ok.out.find("# total #wrong: 0") != std::string::npos);
  CHECK(ok.out.find("memcpy_us") != std::string::npos);
  CHECK(ok.out.find("ours/memcpy") != std::string::npos);
  for (const auto& l : lines(ok.out)) {
    CAPTURE(l);
    CHECK(l.size() <= 100);
  }
  std::ifstream in(csv);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str().find("ours_over_memcpy") != std::string::npos);
  CHECK(data_rows(text.str(), ',').size() == 8);  // 1K and 4K, four ops
  std::remove(csv.c_str());

  // 1K and 4K (256 and 1024 float32, the default type) x 2 calls x 2 devices: all_reduce,
  // all_gather and all_to_all hold count elements per device, reduce_scatter count/2.
  const std::size_t all = 2 * 2 * ((256 + 1024) * 3 + (128 + 512));
  const auto bad = run_binary("shardlab bench collectives --max 4K --iters 2 --warmup 0 --perturb-expected");
  CHECK(bad.status == 1);
  CHECK(bad.out.find("# total #wrong: " + std::to_string(all) + "\n") != std::string::npos);
}

TEST_CASE("bench collectives: the printed table keeps within 100 columns on both backends, at the widest default row") {
  // The default largest size (16M), slow calls and --perturb-expected at the default 20 calls on 2
  // devices: 20 x 2 x 2097152 wrong elements per implementation.
  BenchResult r;
  r.header = {"shardlab bench collectives: backend mpi, mesh X=2, group over X (2 devices)",
              "time: a header line longer than the table, as the BLAS and MPICH lines are, is cut at spaces into "
              "lines of at most 100 characters, the later ones indented under the first, so that nothing a reader "
              "needs runs off a terminal of 100 columns"};
  r.group_size = 2;
  for (const std::string op : {"all_reduce", "reduce_scatter"}) {
    BenchRow row{op, 16777216, 2097152, 0.987654, 0.876543, 83886080, 83886080};
    row.memcpy_bytes = 16777216;
    row.memcpy_seconds = 0.0123456;
    row.ours_first = 10;
    r.rows.push_back(row);
  }
  for (bool native : {false, true}) {
    CAPTURE(native);
    r.native = native;
    const std::string t = bench_table(r);
    for (const auto& l : lines(t)) {
      CAPTURE(l);
      CHECK(l.size() <= 100);
    }
    const auto cols = columns_of(t);
    CHECK((index_of(cols, "ours/memcpy") < cols.size()) == !native);  // under MPI memcpy is in the CSV only
    CHECK((index_of(cols, "ours/native") < cols.size()) == native);
    CHECK(t.find("\n# time: a header line longer") != std::string::npos);
    CHECK(t.find("\n#     ") != std::string::npos);  // its continuation
  }
}
