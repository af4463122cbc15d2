// The sweeps behind `make plots`: predicted bytes equal the ledger of real runs, the share table
// holds the cost model's numbers (tests/test_step_cost.cpp checks those by hand), the files are plot-ready, bad input writes nothing,
// and gnuplot renders every plots/*.gp from them (skipped with a message without gnuplot).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "harness/bench/bench.hpp"
#include "harness/jobs/job_sweep.hpp"
#include "harness/cost/cost.hpp"
#include "harness/models/ffn.hpp"
#include "harness/models/step_cost.hpp"
#include "harness/models/sweep.hpp"
#include "run_binary.hpp"

using namespace shardlab;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("shardlab_sweep_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

std::string shell(const std::string& command, int* status = nullptr) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int raw = ::pclose(p);
  if (status) *status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return out;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}


}  // namespace

TEST_CASE("sweep: meshes of the sweep") {
  CHECK(sweep_device_counts(64) == std::vector<int>{1, 2, 4, 8, 16, 32, 64});
  CHECK(sweep_device_counts(6) == std::vector<int>{1, 2, 4});
  CHECK(two_axis_mesh(1) == "X=1,Y=1");
  CHECK(two_axis_mesh(2) == "X=1,Y=2");
  CHECK(two_axis_mesh(8) == "X=2,Y=4");  // the article's mesh
  CHECK(two_axis_mesh(64) == "X=8,Y=8");
  CHECK_THROWS_AS(two_axis_mesh(6), Error);
  CHECK_THROWS_AS(sweep_device_counts(0), Error);
}

TEST_CASE("sweep bytes and memory equal the ledger and the blocks of running every strategy (1-8 devices)") {
  const std::string dims = "B=8,S=2,M=16,H=64";
  const DatTable bytes = bytes_sweep(dims, 8), memory = memory_sweep(dims, 8);
  REQUIRE(bytes.blocks.size() == 1);
  REQUIRE(bytes.blocks[0].rows.size() == 4);
  Runtime rt(Backend::sim, false, DType::float32);  // the sweep counts float32 elements
  int runs = 0;
  for (std::size_t row = 0; row < 4; ++row) {
    const int n = 1 << row;
    for (const auto& s : ffn_strategies()) {
      const Mesh mesh = Mesh::parse(s.mesh_axes == 2 ? two_axis_mesh(n) : "D=" + std::to_string(n));
      CAPTURE(s.name);
      CAPTURE(mesh.text());
      FfnConfig c;
      c.strategy = s.name;
      c.dims = parse_ffn_dims(dims);
      c.backward = true;
      c.finite_differences = false;
      const FfnResult r = run_ffn(rt, mesh, c);
      CHECK(r.pass());
      std::size_t forward = 0;
      for (std::size_t i = 0; i < r.forward_collectives && i < r.collectives.size(); ++i)
        forward += r.collectives[i].bytes_per_device;
      CHECK(bytes.number(0, row, s.name + "_B") == double(r.bytes_per_device));
      CHECK(bytes.number(0, row, s.name + "_fwd_B") == double(forward));
      CHECK(memory.number(0, row, s.name + "_peak_B") == double(r.peak_bytes_per_device));
      CHECK(memory.number(0, row, s.name + "_stored_B") == double(r.stored_bytes_per_device));
      ++runs;
    }
  }
  CHECK(runs == 24);
  // One device: nothing moves, and the sharded step stores what the unsharded one does (its peak
  // may count one more transient buffer: the sharded program's plan steps on a group of one).
  for (const auto& s : ffn_strategies()) {
    CHECK(bytes.number(0, 0, s.name + "_B") == 0);
    CHECK(memory.number(0, 0, s.name + "_stored_B") == memory.number(0, 0, "unsharded_stored_B"));
    CHECK(memory.number(0, 0, s.name + "_peak_B") >= memory.number(0, 0, "unsharded_peak_B"));
  }
}

TEST_CASE("sweep bytes at the default model: data parallel by hand") {
  const DatTable t = bytes_sweep();  // B=64,S=8,M=256,H=1024, float32
  // D=2: forward moves nothing; backward all-reduces dW_in and dW_out, 256*1024 floats = 1 MiB
  // each, and a ring AllReduce sends 2(n-1)/n of it = all of it at n = 2.
  CHECK(t.number(0, 1, "data_fwd_B") == 0);
  CHECK(t.number(0, 1, "data_B") == 2 * 1048576.0);
  // The same in bfloat16: half the bytes; in float64: twice.
  CHECK(bytes_sweep("B=64,S=8,M=256,H=1024", 2, DType::bfloat16).number(0, 1, "data_B") == 1048576.0);
  CHECK(bytes_sweep("B=64,S=8,M=256,H=1024", 2, DType::float64).number(0, 1, "data_B") == 4 * 1048576.0);
  CHECK(t.blocks[0].rows[3][t.column("gspmd_mesh")] == "2x4");
  CHECK(t.blocks[0].rows.size() == 7);  // 1 ... 64 devices
}

TEST_CASE("share sweep: the table holds collective_seconds and compute_seconds of each preset") {
  const DatTable t = share_sweep("B=2,S=4,M=8,H=32", 2);
  std::size_t block = t.blocks.size();
  for (std::size_t i = 0; i < t.blocks.size(); ++i)
    if (t.blocks[i].title.rfind("pairwise:", 0) == 0) block = i;
  REQUIRE(block < t.blocks.size());
  REQUIRE(t.blocks[block].rows.size() == 1);  // D=2 only
  for (const auto& h : hardware_presets()) {
    CAPTURE(h.name);
    const double n = 64 * h.element_bytes, comm = h.launch + 2 * h.alpha + n / h.bytes_per_s + n / 2 / h.reduce_bytes_per_s;
    const double compute = 4096 / h.flops_per_s;
    CHECK(t.number(block, 0, h.name + "_fwd_comm_ms") == doctest::Approx(comm * 1e3).epsilon(1e-5));
    CHECK(t.number(block, 0, h.name + "_fwd_compute_ms") == doctest::Approx(compute * 1e3).epsilon(1e-5));
    CHECK(t.number(block, 0, h.name + "_fwd_pct") == doctest::Approx(100 * comm / (comm + compute)).epsilon(1e-3));
    CHECK(t.number(block, 0, h.name + "_train_comm_ms") == doctest::Approx(2 * comm * 1e3).epsilon(1e-5));
  }
  // The article's sizes: data parallel splits B=8 and so stops at 8 devices; the note says so.
  const DatTable article = share_sweep();
  bool noted = false;
  for (const auto& n : article.notes) noted = noted || n.rfind("data left out on 16, 32, 64", 0) == 0;
  CHECK(noted);
}

TEST_CASE("zero sweep: the ZeRO paper's 7.5B on 64 devices, and plain DP flat at 16 bytes per parameter") {
  const DatTable t = zero_sweep();
  REQUIRE(t.blocks.size() == 1);
  std::size_t row64 = 0;
  for (std::size_t r = 0; r < t.blocks[0].rows.size(); ++r) {
    if (t.number(0, r, "devices") == 64) row64 = r;
    CHECK(t.number(0, r, "dp_GB") == 120);  // 16 bytes x 7.5e9, whatever the device count
  }
  // The paper's figure 1: 120, 31.4, 16.6, 1.9 GB.
  CHECK(t.number(0, row64, "zero1_GB") == doctest::Approx(31.4).epsilon(0.005));
  CHECK(t.number(0, row64, "zero2_GB") == doctest::Approx(16.6).epsilon(0.005));
  CHECK(t.number(0, row64, "zero3_GB") == doctest::Approx(1.9).epsilon(0.02));
  CHECK(t.number(0, 0, "devices") == 1);
  CHECK(t.number(0, 0, "zero3_GB") == 120);  // one device: nothing to split
}

TEST_CASE("dat files: # header rows, numbered columns, gnuplot blocks; written whole or not at all") {
  DatTable t;
  t.name = "demo";
  t.notes = {"what this is"};
  t.columns = {"size_B", "time_us"};
  t.blocks = {{"first", {{"8", "1.5"}, {"16", "-"}}}, {"second", {{"8", "2"}}}};
  const std::string text = t.text();
  CHECK(text.rfind("# what this is\n# columns: 1 size_B, 2 time_us\n", 0) == 0);
  CHECK(text.find("\n\n\n# block 1 (gnuplot index 1): second\n") != std::string::npos);
  CHECK(std::isnan(t.number(0, 1, "time_us")));
  CHECK(t.number(1, 0, "time_us") == 2);
  CHECK_THROWS_AS(t.number(0, 0, "bytes"), Error);
  for (const auto& line : split(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    CHECK(line.find_first_not_of(" 0123456789.-") == std::string::npos);  // numbers only
  }

  const fs::path dir = fresh_dir("write");
  const auto written = write_dat_files(dir.string(), {t});
  REQUIRE(written.size() == 1);
  CHECK(slurp(written[0]) == text);
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);  // no temporaries left
  std::ofstream(dir / "a_file") << "x";
  CHECK_THROWS_AS(write_dat_files((dir / "a_file").string(), {t}), Error);
  fs::remove_all(dir);
}

TEST_CASE("busbw: a bench CSV read back gives the run's rows, group size and the model beside them") {
  BenchResult r;
  r.header = {"shardlab bench collectives: backend mpi, mesh X=2, group over X (2 devices)"};
  r.group_size = 2;
  r.native = true;
  r.rows = {{"all_reduce", 1024, 128, 10e-6, 12e-6, 0, 0}, {"all_reduce", 4096, 512, 20e-6, 18e-6, 0, 0},
            {"all_gather", 1024, 128, 8e-6, -1, 0, 0}};
  const BenchResult back = parse_bench_csv(bench_csv(r), "bench.csv");
  CHECK(back.group_size == 2);
  REQUIRE(back.rows.size() == 3);
  CHECK(back.rows[1].bytes == 4096);
  CHECK(back.rows[1].ours_seconds == doctest::Approx(20e-6));
  CHECK(back.rows[2].native_seconds < 0);
  const DatTable t = busbw_table(back, "read from bench.csv");
  REQUIRE(t.blocks.size() == 2);  // all_reduce, all_gather
  CHECK(t.blocks[0].title == "all_reduce");
  // busbw = bytes / time * 2(n-1)/n = 4096 B / 20 us * 1 = 0.2048 GB/s
  CHECK(t.number(0, 1, "ours_busbw_GBps") == doctest::Approx(0.2048).epsilon(1e-3));
  CHECK(std::isnan(t.number(1, 0, "native_busbw_GBps")));
  const Hardware& h = hardware_preset("this-machine");
  CHECK(t.number(0, 0, "model_us") ==
        doctest::Approx(collective_seconds("all_reduce", Algorithm::ring, 2, 1024, h) * 1e6).epsilon(1e-3));
  CHECK_THROWS_AS(parse_bench_csv("# nothing\n", "empty.csv"), Error);
  CHECK_THROWS_AS(parse_bench_csv("all_reduce,12,x\n", "bad.csv"), Error);
}

TEST_CASE("busbw: the fit column recovers the link a run was made on; too few sizes leave it empty") {
  // A run timed by hand on a made-up link of 2 devices: alpha 6 us, 1 GB/s, reductions at the
  // preset's rate (the fit assumes it). Ring all_reduce of n bytes: 2 alpha + n/link + (n/2)/reduce;
  // all_gather: alpha + (n/2)/link. The fitted line must lie on that link's busbw for both.
  const double alpha = 6e-6, link = 1e9, reduce = hardware_preset("this-machine").reduce_bytes_per_s;
  auto seconds = [&](const std::string& op, double n) {
    return op == "all_reduce" ? 2 * alpha + n / link + n / 2 / reduce : alpha + n / 2 / link;
  };
  BenchResult r;
  r.group_size = 2;
  for (const std::string op : {"all_reduce", "all_gather"})
    for (std::size_t n = 1024; n <= (4u << 20); n *= 4) r.rows.push_back({op, n, n / 8, seconds(op, double(n)), -1, 0, 0});
  const DatTable t = busbw_table(r, "made up");
  REQUIRE(t.blocks.size() == 2);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t i = 0; i < t.blocks[b].rows.size(); ++i) {
      CAPTURE(t.blocks[b].title);
      CAPTURE(i);
      // busbw at 2 devices: all_reduce bytes/t * 2(1/2) = bytes/t; all_gather bytes/t * 1/2
      const double bytes = 1024.0 * (1 << (2 * i)), f = b == 0 ? 1.0 : 0.5;
      const double expected = bytes / seconds(t.blocks[b].title, bytes) * f / 1e9;
      CHECK(t.number(b, i, "fit_busbw_GBps") == doctest::Approx(expected).epsilon(2e-3));
      CHECK(t.number(b, i, "model_busbw_GBps") > 1.5 * expected);  // the preset's faster alpha and link
    }
  bool fit = false, preset = false;
  for (const auto& n : t.notes) {
    fit = fit || n.rfind("fit: launch 0 us, alpha 6 us, link 1 GB/s", 0) == 0;
    preset = preset || n.rfind("preset: launch 0 us, alpha 1.98 us, link 4.46 GB/s", 0) == 0;  // cost.cpp's figures
  }
  CHECK(fit);
  CHECK(preset);

  BenchResult one;
  one.group_size = 2;
  one.rows = {{"all_reduce", 1024, 128, 10e-6, -1, 0, 0}};
  const DatTable lone = busbw_table(one, "one size");
  CHECK(std::isnan(lone.number(0, 0, "fit_busbw_GBps")));
  preset = false;
  for (const auto& n : lone.notes) preset = preset || n.rfind("preset: launch", 0) == 0;
  CHECK(preset);  // the plot's title reads the preset from its own row, fit or no fit
}

TEST_CASE("shardlab sweep: bad input exits 2 with one sentence and writes nothing") {
  using namespace shardlab::testing;
  const fs::path dir = fresh_dir("bad");
  for (const std::string args : {"--what bytes,pictures", "--what bytes,share --share-dims Q=3",
                                 "--what bytes --dims B=8,S=oops", "--what busbw --bench-csv /nonexistent.csv",
                                 "--what bytes,share --machine /nonexistent.dat"}) {
    CAPTURE(args);
    const Ran r = run_binary("shardlab sweep --out " + dir.string() + " " + args);
    CHECK(r.status == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(!fs::exists(dir));
  }
  const Ran ok = run_binary("shardlab sweep --out " + dir.string() + " --what bytes,memory --max-devices 4");
  CHECK(ok.status == 0);
  CHECK(fs::file_size(dir / "bytes_per_device.dat") > 0);
  CHECK(fs::file_size(dir / "memory_per_device.dat") > 0);
  fs::remove_all(dir);
}

TEST_CASE("plots: every plots/*.gp renders a non-empty PNG and draws labelled axes and a legend in dumb mode") {
  int status = 0;
  shell("command -v gnuplot", &status);
  if (status != 0 || !fs::is_directory("plots")) {
    MESSAGE("gnuplot not found (or not run from the repository root): skipping plots");
    return;
  }
  const fs::path dir = fresh_dir("plots");
  BenchOptions b;  // a tiny in-process benchmark: the picture, not the numbers
  b.min = "1K";
  b.max = "4K";
  b.iters = 1;
  b.warmup = 0;
  write_dat_files(dir.string(), {bytes_sweep(), share_sweep(), memory_sweep(), zero_sweep(), bubble_sweep(),
                                 plan_model_sweep(), busbw_table(run_collectives_bench(b), "test run")});
  int scripts = 0;
  for (const auto& e : fs::directory_iterator("plots")) {
    if (e.path().extension() != ".gp") continue;
    ++scripts;
    const std::string gp = e.path().string(), name = e.path().stem().string();
    CAPTURE(gp);
    const std::string vars = "dir='" + dir.string() + "'; term='";
    const std::string out = shell("gnuplot -e \"" + vars + "pngcairo'\" " + gp, &status);
    CHECK_MESSAGE(status == 0, out);
    const fs::path png = dir / (name + ".png");
    REQUIRE(fs::exists(png));
    CHECK(fs::file_size(png) > 1000);
    CHECK(slurp(png).rfind("\x89PNG", 0) == 0);
    const std::string dumb = shell("gnuplot -e \"" + vars + "dumb'\" " + gp, &status);
    CHECK(status == 0);
    CHECK(dumb.size() > 1000);
    if (name == "bytes_per_device") {  // axis label and legend entries, as text
      CHECK(dumb.find("devices") != std::string::npos);
      CHECK(dumb.find("gspmd") != std::string::npos);
      CHECK(dumb.find("pairwise") != std::string::npos);
    }
  }
  CHECK(scripts >= 4);
  fs::remove_all(dir);
}

TEST_CASE("machine: launch and the link fitted from a benchmark's ring rows, written with the rates") {
  Hardware truth;
  truth.launch = 5e-6;
  truth.alpha = 1.5e-6;
  truth.bytes_per_s = 4e9;
  truth.reduce_bytes_per_s = 12e9;
  BenchResult r;
  r.group_size = 2;
  for (std::size_t n = 8; n <= (32u << 20); n *= 4) {
    for (const char* op : {"all_reduce", "all_gather", "reduce_scatter"})
      r.rows.push_back({op, n, n / 8, collective_seconds(op, Algorithm::ring, 2, double(n), truth), -1, 0, 0});
    r.rows.push_back({"all_to_all", n, n / 8, 1.0, -1, 0, 0});  // not a ring collective: left out of the fit
  }
  const LinkFit f = fit_bench_link(r, truth.reduce_bytes_per_s);
  CHECK(f.launch_fitted);
  CHECK(f.launch == doctest::Approx(5e-6).epsilon(0.01));
  CHECK(f.alpha == doctest::Approx(1.5e-6).epsilon(0.01));
  CHECK(f.bytes_per_s == doctest::Approx(4e9));
  CHECK(f.points == 36);
  // all_reduce alone: one step count, so launch folds into alpha (2 steps: 1.5 + 5 / 2 us each).
  BenchResult only;
  only.group_size = 2;
  for (const auto& row : r.rows)
    if (row.op == "all_reduce") only.rows.push_back(row);
  const LinkFit folded = fit_bench_link(only, truth.reduce_bytes_per_s);
  CHECK_FALSE(folded.launch_fitted);
  CHECK(folded.launch == 0);
  CHECK(folded.alpha == doctest::Approx(4e-6));
  CHECK(machine_table(MachineRates{}, &folded, "test").text().find("launch cannot be told from alpha") != std::string::npos);
  MachineRates m;
  m.gemm_n = 512;
  m.gemm_flops_per_s = 20e9;
  m.reduce_bytes = 8 << 20;
  m.reduce_bytes_per_s = 12e9;
  const DatTable t = machine_table(m, &f, "test");
  CHECK(t.number(0, 0, "alpha_us") == doctest::Approx(1.5));
  CHECK(t.number(0, 0, "launch_us") == doctest::Approx(5));
  CHECK(std::isnan(machine_table(m).number(0, 0, "launch_us")));
  CHECK(t.number(0, 0, "link_GBps") == doctest::Approx(4));
  CHECK(t.number(0, 0, "gemm_GFLOPs") == doctest::Approx(20));
  CHECK(std::isnan(machine_table(m).number(0, 0, "link_GBps")));  // sim: no link
  // The fitted formula's letters are the lessons': n devices, S bytes; the gemm's size is
  // a number, not a second n.
  const std::string text = t.text();
  CHECK(text.find("fitted to launch + steps alpha + S(n-1)/n / link (all_reduce: 2(n-1) steps") != std::string::npos);
  CHECK(text.find("for n devices and S bytes") != std::string::npos);
  CHECK(text.find("launch and alpha apart") != std::string::npos);
  CHECK(text.find("2 x 512^3 FLOPs") != std::string::npos);
  CHECK(text.find("(p-1)") == std::string::npos);
  BenchResult none;
  none.group_size = 2;
  CHECK_THROWS_AS(fit_bench_link(none, 12e9), Error);
}

TEST_CASE("share sweep: gspmd on every shape of 8 devices, the article's 2x4 among them") {
  const DatTable t = share_sweep();  // the article's sizes
  std::size_t shapes = t.blocks.size(), gspmd = t.blocks.size();
  for (std::size_t i = 0; i < t.blocks.size(); ++i) {
    if (t.blocks[i].title.rfind("gspmd_shapes_8:", 0) == 0) shapes = i;
    if (t.blocks[i].title.rfind("gspmd:", 0) == 0) gspmd = i;
  }
  REQUIRE(shapes < t.blocks.size());
  REQUIRE(gspmd < t.blocks.size());
  const std::vector<std::string> meshes = {"1x8", "2x4", "4x2", "8x1"};
  REQUIRE(t.blocks[shapes].rows.size() == meshes.size());
  const Hardware& h = hardware_preset("tpu-v2");
  for (std::size_t r = 0; r < meshes.size(); ++r) {
    CAPTURE(meshes[r]);
    CHECK(t.blocks[shapes].rows[r][0] == meshes[r]);
    const std::string mesh = "X=" + meshes[r].substr(0, 1) + ",Y=" + meshes[r].substr(2);
    const StepCost c = ffn_step_cost("gspmd", mesh, "article", false, h);
    CHECK(t.number(shapes, r, "tpu-v2_fwd_pct") == doctest::Approx(100 * c.share()).epsilon(1e-3));
  }
  // The gspmd block's 8-device row is the 2x4 mesh: the same numbers.
  CHECK(t.blocks[gspmd].rows[2][0] == "2x4");
  CHECK(t.blocks[gspmd].rows[2] == t.blocks[shapes].rows[1]);
}
