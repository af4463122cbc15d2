#include "harness/cli/cmd_sweep.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <thread>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>

#include "collectives/mpi.hpp"
#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "harness/cli/cli.hpp"
#include "core/text.hpp"
#include "core/write_file.hpp"
#include "harness/bench/bench.hpp"
#include "harness/cost/cost.hpp"
#include "harness/cost/machine.hpp"
#include "harness/jobs/job_sweep.hpp"
#include "harness/models/sweep.hpp"
#include "harness/cli/timeout_option.hpp"

namespace shardlab {

namespace {

struct SweepOptions {
  std::string out = "build/plots";
  std::string what = "bytes,share,memory,zero,bubble,busbw";
  std::string dims = "B=64,S=8,M=256,H=1024";
  std::string share_dims = "article";
  std::string dtype = "float32";  // element type of every sweep
  int max_devices = 64;
  std::string backend = "sim";
  std::string min = "1K", max = "4M";
  int iters = -1;
  std::string bench_csv;
  std::string machine;  // a machine.dat for the this-machine preset
};

const std::vector<std::string> kWhat = {"bytes", "share", "memory", "zero", "bubble", "plan", "busbw", "machine"};

// How well the fit holds: "rate from 512K up, within 2% over 12 timings; all 36 timings within 61%"
// (a timing: one collective at one size).
std::string fit_text(const LinkFit& f) {
  return "rate from " + size_text(std::size_t(f.rate_from_bytes)) + " up, within " +
         format_number(100 * f.max_rel_err_rate, "%.0f") + "% over " + std::to_string(f.rate_points) +
         " timings; all " + std::to_string(f.points) + " timings within " + format_number(100 * f.max_rel_err, "%.0f") + "%";
}

// One line on how this run's link compares with the this-machine preset, which was measured once
// on one machine: a user on another machine learns to remeasure before trusting its times.
std::string busbw_fit_line(const std::optional<LinkFit>& f, Backend backend, const Hardware& hw) {
  if (!f) return "sweep: busbw: too few sizes of any ring collective to fit launch, alpha and the link rate";
  char line[768];
  std::snprintf(line, sizeof line,
                "sweep: busbw%s: this run's ring collectives fit launch %.2f us, alpha %.2f us, link %.4g GB/s\n"
                "sweep: the fit: %s\nsweep: %s\n"
                "sweep: the this-machine preset has launch %.2f us, alpha %.2f us, %.2f GB/s; remeasure it with\n"
                "  mpiexec -n 2 build/bin/shardlab sweep --what machine --backend mpi",
                backend == Backend::sim ? " (sim: threads sharing memory, not a link)" : "", f->launch * 1e6, f->alpha * 1e6,
                f->bytes_per_s / 1e9, fit_text(*f).c_str(), launch_note(*f).substr(2).c_str(), hw.launch * 1e6, hw.alpha * 1e6,
                hw.bytes_per_s / 1e9);
  return line;
}

// The tables that only the root computes from measurements every rank took part in, and the lines
// it prints once the files are written.
struct RootWork {
  std::vector<DatTable> tables;
  std::vector<std::string> lines;
};

// The file each --what table is written to, in --out.
const std::map<std::string, std::string> kDatName = {
    {"bytes", "bytes_per_device"}, {"share", "comm_share"}, {"memory", "memory_per_device"}, {"zero", "zero_memory"},
    {"bubble", "bubble"},          {"plan", "plan_model"},  {"busbw", "busbw"},      {"machine", "machine"}};

// Refuses, before anything is measured, a .dat file that could not be written after it (a
// read-only or immutable one, a directory in its place) or an --out that could not be made.
void check_dat_targets(const std::string& dir, const std::vector<std::string>& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(dir, ec)) {  // made later: its nearest existing parent must take it
    fs::path up = fs::absolute(dir, ec);
    while (!fs::exists(up, ec) && up != up.parent_path()) up = up.parent_path();
    if (!fs::is_directory(up, ec) || ::access(up.c_str(), W_OK) != 0)
      throw Error(ErrorKind::io, "cannot create directory " + dir + ": " + up.string() + " is not a writable directory");
    return;
  }
  if (!fs::is_directory(dir, ec)) throw Error(ErrorKind::io, "--out " + dir + " is a file, not a directory");
  for (const auto& w : what) check_writable((fs::path(dir) / (kDatName.at(w) + ".dat")).string(), "sweep table");
}

int run_sweep(const SweepOptions& o) {
  const Backend backend = parse_backend(o.backend);
  const DType dtype = parse_dtype(o.dtype);
  std::vector<std::string> what;
  for (const auto& w : split(o.what, ',')) {
    if (std::find(kWhat.begin(), kWhat.end(), trim(w)) == kWhat.end())
      throw Error(ErrorKind::parse, "--what names '" + w + "'; choose from " + join(kWhat, ","));
    what.push_back(trim(w));
  }
  auto wants = [&](const std::string& w) { return std::find(what.begin(), what.end(), w) != what.end(); };
  const int processes = launched_processes(), cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (backend == Backend::mpi && processes == 0)
    throw Error(ErrorKind::world_size, "--backend mpi measures processes started by mpiexec; run mpiexec -n 2 "
                                       "build/bin/shardlab sweep --what " + o.what + " --backend mpi");
  const int sharing = processes_on_these_cores();
  if (backend == Backend::mpi && wants("machine") && sharing > cores)
    throw Error(ErrorKind::world_size, "--what machine under " + std::to_string(sharing) + " processes on " +
                                           std::to_string(cores) + " cores would fit waiting, not the link; run it with mpiexec -n " +
                                           std::to_string(std::min(cores, 2)));
  check_dat_targets(o.out, what);  // every rank: all refuse alike
  // Everything that can fail on bad input runs before anything is written.
  const std::vector<Hardware> presets = presets_with_machine(o.machine);
  const Hardware& machine = hardware_preset("this-machine", presets);
  RootWork root;
  if (wants("bytes")) root.tables.push_back(bytes_sweep(o.dims, o.max_devices, dtype));
  if (wants("share")) root.tables.push_back(share_sweep(o.share_dims, o.max_devices, &presets));
  if (wants("memory")) root.tables.push_back(memory_sweep(o.dims, o.max_devices, dtype));
  if (wants("zero")) root.tables.push_back(zero_sweep());
  if (wants("plan")) root.tables.push_back(plan_model_sweep());
  if (wants("bubble") && process_is_root()) root.tables.push_back(bubble_sweep());
  if (wants("busbw") && !o.bench_csv.empty())
    root.tables.push_back(
        busbw_table(parse_bench_csv(read_text_file(o.bench_csv, "--bench-csv"), o.bench_csv), "read from " + o.bench_csv, &machine));
  // Measurements: every rank takes part; then only the root fits, tabulates and writes. An error
  // there (a fit that fails, an unwritable --out) must reach the other ranks through agree() below
  // rather than leave them waiting: the root says it in one sentence and the status is 2 everywhere.
  BenchResult busbw_run, link_run;
  MachineRates rates;
  if (wants("busbw") && o.bench_csv.empty()) {
    BenchOptions b;
    b.backend = o.backend;
    b.min = o.min;
    b.max = o.max;
    b.iters = o.iters;
    b.dtype = o.dtype;
    busbw_run = run_collectives_bench(b);
  }
  if (wants("machine")) {
    rates = measure_machine_rates();
    if (backend == Backend::mpi) {  // the link: our ring collectives from 8 B to 32 MiB, fitted
      // all_reduce's 2(p-1) steps beside all_gather's and reduce_scatter's p-1 tell launch from alpha
      BenchOptions b;
      b.backend = "mpi";
      b.ops = "all_reduce,all_gather,reduce_scatter";
      b.min = "8";
      b.max = "32M";
      b.dtype = o.dtype;
      link_run = run_collectives_bench(b);
    }
  }
  int status = 0;
  if (process_is_root()) {
    try {
      if (wants("busbw") && o.bench_csv.empty()) {
        std::optional<LinkFit> fit;
        root.tables.push_back(busbw_table(busbw_run, "measured in-process (" + o.backend + " backend, sizes " + o.min +
                                                         " to " + o.max + ")", &machine, &fit));
        root.lines.push_back(busbw_fit_line(fit, backend, machine));
      }
      if (wants("machine") && backend == Backend::mpi) {
        const LinkFit link = fit_bench_link(link_run, rates.reduce_bytes_per_s);
        const std::string source = "ring all_reduce, all_gather and reduce_scatter on " + std::to_string(link_run.group_size) +
                                   " processes, " + std::to_string(link.points) + " timings (sizes from 8 B to 32 MiB), median "
                                   "of 20 calls each (2 when processes outnumber cores)";
        root.tables.push_back(machine_table(rates, &link, source));
        char line[512];
        std::snprintf(line, sizeof line,
                      "sweep: this machine: launch %.2f us a call, alpha %.2f us, link %.4g GB/s\n"
                      "sweep: reduction %.1f GB/s, float64 GEMM %.1f GFLOP/s\nsweep: the fit: %s\nsweep: %s",
                      link.launch * 1e6, link.alpha * 1e6, link.bytes_per_s / 1e9, rates.reduce_bytes_per_s / 1e9,
                      rates.gemm_flops_per_s / 1e9, fit_text(link).c_str(), launch_note(link).substr(2).c_str());
        root.lines.push_back(line);
      } else if (wants("machine")) {
        root.tables.push_back(machine_table(rates));
        char line[256];
        std::snprintf(line, sizeof line,
                      "sweep: this machine: reduction %.1f GB/s, float64 GEMM %.1f GFLOP/s (the link needs mpiexec -n "
                      "2 ... --backend mpi)",
                      rates.reduce_bytes_per_s / 1e9, rates.gemm_flops_per_s / 1e9);
        root.lines.push_back(line);
      }
      const std::vector<std::string> written = write_dat_files(o.out, root.tables);
      for (const auto& l : root.lines) std::cout << l << "\n";
      for (const auto& path : written) std::cout << "sweep: wrote " << path << "\n";
    } catch (const Error& e) {
      if (backend != Backend::mpi) throw;
      std::cerr << "error: " << e.what() << "\n";
      status = e.kind() == ErrorKind::fault ? 3 : 2;
    }
  }
  return backend == Backend::mpi ? mpi::agree(status) : status;
}

}  // namespace

Command add_sweep_command(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  auto* c = app.add_subcommand(
      "sweep",
      "write plot-ready .dat files (# header rows name the columns and units) for plots/*.gp: bytes per device "
      "and memory per device against device count for every FFN strategy, the modeled communication share of an "
      "FFN step per hardware preset, ZeRO memory per device by stage, measured busbw ours against MPICH's (make plots draws them)");
  c->add_option("--out", o->out, "directory for the .dat files (created if missing)")->capture_default_str();
  c->add_option("--what", o->what, "tables to write, comma separated: bytes,share,memory,zero,bubble,plan,busbw; machine measures "
                                   "this machine's GEMM and reduction rates, and under mpiexec -n 2 with --backend mpi "
                                   "fits launch, alpha and the link rate (the this-machine preset's figures)")
      ->capture_default_str();
  c->add_option("--dims", o->dims, "FFN sizes of the bytes and memory sweeps (B,S,M,H)")->capture_default_str();
  c->add_option("--dtype", o->dtype, "element type of every sweep: float32, float64 or bfloat16")
      ->capture_default_str();
  c->add_option("--share-dims", o->share_dims, "FFN sizes of the share sweep; article = B=8,S=512,M=5120,H=20480")
      ->capture_default_str();
  c->add_option("--max-devices", o->max_devices, "largest device count (powers of two from 1)")->capture_default_str();
  add_collective_timeout(c);
  c->add_option("--backend", o->backend,
                "busbw: sim (threads, ours only) or mpi (mpiexec -n 2 build/bin/shardlab sweep --what busbw --backend "
                "mpi: ours and MPICH's)")
      ->capture_default_str();
  c->add_option("--min", o->min, "busbw: smallest message (K, M, G suffixes)")->capture_default_str();
  c->add_option("--max", o->max, "busbw: largest message")->capture_default_str();
  at_least(c->add_option("--iters", o->iters, "busbw: timed calls per size (default as bench collectives)"), 1);
  c->add_option("--machine", o->machine,
                "share and busbw: the this-machine preset's figures from this machine.dat (written by --what machine)");
  c->add_option("--bench-csv", o->bench_csv, "busbw: read this `shardlab bench collectives --csv` file instead of running");
  return {c, [o] { return run_sweep(*o); }};
}

}  // namespace shardlab
