// The measured tables of `shardlab sweep` (harness/models/sweep.hpp): busbw from a benchmark run
// or its CSV beside the model and a fitted line, this machine's arithmetic rates, the link fitted
// to a benchmark, and machine.dat.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <regex>
#include <sstream>

#include "core/blas.hpp"
#include "core/einsum.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "harness/bench/bench.hpp"
#include "harness/cost/cost.hpp"
#include "harness/cost/machine.hpp"
#include "harness/cost/topology.hpp"
#include "harness/models/sweep.hpp"

namespace shardlab {

// ---- busbw ----

DatTable busbw_table(const BenchResult& r, const std::string& source, const Hardware* machine,
                     std::optional<LinkFit>* fit_out) {
  const Hardware& hw = machine ? *machine : hardware_preset("this-machine");
  DatTable t;
  t.name = "busbw";
  t.notes = {"shardlab sweep: bus bandwidth of each collective, " + source};
  for (const auto& h : r.header) t.notes.push_back("bench: " + h);
  t.notes.push_back("busbw in GB/s (1e9 B/s) as nccl-tests: algbw * 2(n-1)/n (all_reduce) or (n-1)/n; n = " +
                    std::to_string(r.group_size) + " devices; time in us per call, slowest device");
  t.notes.push_back("ours: shardlab's ring (pairwise all_to_all); native: MPICH's MPI_* ('-' on the sim backend); "
                    "model: the this-machine preset's alpha-beta-gamma time (ring; pairwise all_to_all)");
  // The preset was measured once, on one machine; the fit is this run's own link, so a reader sees
  // both how well alpha-beta describes the run and how far this machine is from the preset.
  bool fitted = false;
  LinkFit fit;
  try {
    fit = fit_bench_link(r, hw.reduce_bytes_per_s);
    fitted = true;
  } catch (const Error&) {
  }
  if (fit_out) *fit_out = fitted ? std::optional<LinkFit>(fit) : std::nullopt;
  Hardware run_hw = hw;
  run_hw.launch = fit.launch;
  run_hw.alpha = fit.alpha;
  run_hw.bytes_per_s = fit.bytes_per_s;
  t.notes.push_back(
      fitted ? "fit: launch " + dat_number(fit.launch * 1e6, "%.3g") + " us, alpha " + dat_number(fit.alpha * 1e6, "%.3g") + " us, link " +
                   dat_number(fit.bytes_per_s / 1e9, "%.3g") + " GB/s, within " + dat_number(100 * fit.max_rel_err, "%.0f") + "% over " +
                   dat_integer(fit.points) + " sizes: fitted to this run's ours all_reduce, all_gather and reduce_scatter " +
                   "(the preset's reduction rate)" + launch_note(fit)
             : "fit: '-' (this run has no collective with two sizes or more, or their times do not grow with size)");
  t.notes.push_back("preset: launch " + dat_number(hw.launch * 1e6, "%.3g") + " us, alpha " + dat_number(hw.alpha * 1e6, "%.3g") + " us, link " + dat_number(hw.bytes_per_s / 1e9, "%.3g") +
                    " GB/s (this-machine: " + hw.description + ")");
  t.columns = {"size_B", "ours_us", "ours_busbw_GBps", "native_us", "native_busbw_GBps", "model_us",
               "model_busbw_GBps", "fit_us", "fit_busbw_GBps"};
  for (const auto& row : r.rows) {
    if (t.blocks.empty() || t.blocks.back().title != row.op) t.blocks.push_back({row.op, {}});
    const double f = bus_factor(row.op, r.group_size);
    auto bw = [&](double s) { return s > 0 ? dat_number(row.bytes / s * f / 1e9, "%.4f") : "-"; };
    auto us = [&](double s) { return s > 0 ? dat_number(s * 1e6, "%.2f") : "-"; };
    const Algorithm algo = row.op == "all_to_all" ? Algorithm::pairwise : Algorithm::ring;
    const double model = collective_seconds(row.op, algo, r.group_size, double(row.bytes), hw);
    const double run_model = fitted ? collective_seconds(row.op, algo, r.group_size, double(row.bytes), run_hw) : -1;
    t.blocks.back().rows.push_back({dat_integer(row.bytes), us(row.ours_seconds), bw(row.ours_seconds),
                                    us(row.native_seconds), bw(row.native_seconds), us(model), bw(model),
                                    us(run_model), bw(run_model)});
  }
  if (t.blocks.empty()) throw Error(ErrorKind::parse, "the benchmark gave no rows to plot");
  return t;
}

BenchResult parse_bench_csv(const std::string& text, const std::string& path) {
  BenchResult r;
  r.group_size = 0;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  double ratio_n = 0;
  const std::regex devices(R"(\((\d+) devices\))");
  while (std::getline(in, line)) {
    ++number;
    if (trim(line).empty()) continue;
    if (line[0] == '#') {
      const std::string h = trim(line.substr(1));
      std::smatch m;
      if (!r.group_size && std::regex_search(h, m, devices)) r.group_size = std::stoi(m[1]);
      // bench_csv's own column rows are replaced by ours
      if (h.rfind("missing values", 0) != 0 && h.rfind("collective,", 0) != 0) r.header.push_back(h);
      continue;
    }
    const auto f = split(line, ',');
    auto bad = [&](const std::string& why) {
      return Error(ErrorKind::parse, path + " line " + std::to_string(number) + " is not a bench collectives CSV row (" +
                                         why + "); make it with shardlab bench collectives --csv");
    };
    if (f.size() < 11) throw bad(std::to_string(f.size()) + " fields, expected 12");
    BenchRow row;
    row.op = f[0];
    try {
      row.bytes = std::stoull(f[1]);
      row.count = std::stoull(f[2]);
      row.ours_seconds = std::stod(f[3]) * 1e-6;
      row.native_seconds = f[7] == "-" ? -1 : std::stod(f[7]) * 1e-6;
      if (row.op == "all_gather" && f[4] != "-" && std::stod(f[4]) > 0)  // busbw/algbw = (n-1)/n
        ratio_n = 1.0 / (1.0 - std::stod(f[5]) / std::stod(f[4]));
    } catch (const std::exception&) {
      throw bad("a number is malformed");
    }
    if (row.op != "all_reduce" && row.op != "all_gather" && row.op != "reduce_scatter" && row.op != "all_to_all")
      throw bad("unknown collective '" + row.op + "'");
    r.rows.push_back(row);
  }
  if (!r.group_size && ratio_n > 1) r.group_size = int(std::lround(ratio_n));
  if (r.rows.empty()) throw Error(ErrorKind::parse, path + " has no benchmark rows; make it with shardlab bench collectives --csv");
  if (r.group_size < 2) throw Error(ErrorKind::parse, path + " does not say its group size (\"(N devices)\" in a # row)");
  return r;
}

// ---- this machine ----

MachineRates measure_machine_rates(std::size_t n, std::size_t reduce_bytes, int reps) {
  use_one_blas_thread();  // one device = one core
  keep_freed_memory();    // as a Runtime's devices run: no page faults in the timed matmuls
  MachineRates m;
  m.gemm_n = n;
  m.reduce_bytes = reduce_bytes / sizeof(double) * sizeof(double);
  using clock = std::chrono::steady_clock;
  const Tensor a = random_uniform({n, n}, 1, -1, 1), b = random_uniform({n, n}, 2, -1, 1);
  static volatile double sink;  // keeps the timed work observable
  double best = 1e300;
  for (int i = 0; i < reps + 1; ++i) {
    const auto t0 = clock::now();
    const Tensor c = matmul(a, b);
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    sink = sink + c(0, 0);
    if (i) best = std::min(best, s);  // the first call warms up
  }
  m.gemm_flops_per_s = 2.0 * n * n * n / best;
  std::vector<double> acc(m.reduce_bytes / sizeof(double), 1.0), incoming(acc.size(), 0.5);
  best = 1e300;
  for (int i = 0; i < reps + 1; ++i) {
    const auto t0 = clock::now();
    double* d = acc.data();
    const double* s = incoming.data();
    for (std::size_t k = 0; k < acc.size(); ++k) d[k] += s[k];  // the ring's reduction loop
    const double sec = std::chrono::duration<double>(clock::now() - t0).count();
    sink = sink + acc[i % acc.size()];
    if (i) best = std::min(best, sec);
  }
  m.reduce_bytes_per_s = m.reduce_bytes / best;
  return m;
}

LinkFit fit_bench_link(const BenchResult& bench, double reduce_bytes_per_s) {
  // The ring collectives: all_reduce takes 2(p-1) steps, all_gather and reduce_scatter p-1, so their
  // latencies tell launch and alpha apart. all_to_all is left out: MPICH may not run it pairwise.
  std::vector<Timings> collectives;
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter"}) {
    Timings c{op, Algorithm::ring, bench.group_size, {}, {}};
    for (const auto& row : bench.rows)
      if (row.op == op && row.ours_seconds > 0) {
        c.n_bytes.push_back(double(row.bytes));
        c.seconds.push_back(row.ours_seconds);
      }
    std::vector<double> distinct = c.n_bytes;
    std::sort(distinct.begin(), distinct.end());
    if (std::unique(distinct.begin(), distinct.end()) - distinct.begin() >= 2) collectives.push_back(c);
  }
  return fit_link(collectives, reduce_bytes_per_s);
}

std::string launch_note(const LinkFit& f) {
  return f.launch_fitted ? "; launch and alpha apart, from their step counts"
                         : "; one step count only, so launch cannot be told from alpha: launch 0, all of it in alpha";
}

DatTable machine_table(const MachineRates& r, const LinkFit* link, const std::string& link_source) {
  DatTable t;
  t.name = "machine";
  t.notes = {"shardlab sweep --what machine: this machine's figures for the this-machine preset (harness/cost/cost.cpp); "
             "float64, one device = one core (one BLAS thread)",
             "gemm: best of repeated " + dat_integer(r.gemm_n) + "x" + dat_integer(r.gemm_n) +
                 " matmul (core/einsum.hpp, OpenBLAS), 2 x " + dat_integer(r.gemm_n) + "^3 FLOPs; reduce: best of repeated acc[i] += in[i] over " +
                 dat_integer(r.reduce_bytes) + " B (the ring's reduction loop), bytes of `in` per second",
             "BLAS: " + blas_description(),
             "measured: " + machine_identity(),
             link ? "launch, alpha, link: " + link_source + "; fitted to launch + steps alpha + S(n-1)/n / link" +
                        " (all_reduce: 2(n-1) steps, twice the bytes, + S(n-1)/n / reduce; all_gather n-1 steps;" +
                        " reduce_scatter n-1 steps, + S(n-1)/n / reduce): the link from the sizes of " +
                        size_text(std::size_t(link->rate_from_bytes)) + " up (least squares on relative error)," +
                        " each collective's latency the median over its smaller sizes, then launch and alpha the" +
                        " line through those latencies against the step counts" + launch_note(*link)
                  : "launch, alpha, link: '-' (no link on the sim backend; run under mpiexec -n 2 with --backend mpi)"};
  if (link)
    t.notes.push_back("  for n devices and S bytes; fit_err_pct = the largest |model - measured| / measured;"
                      " a machine.dat without launch_us (older) reads as launch 0");
  t.columns = {"gemm_n", "gemm_GFLOPs", "reduce_B", "reduce_GBps", "launch_us", "alpha_us", "link_GBps", "fit_sizes",
               "fit_err_pct"};
  t.blocks.push_back({"", {{dat_integer(r.gemm_n), dat_number(r.gemm_flops_per_s / 1e9, "%.3f"), dat_integer(r.reduce_bytes),
                            dat_number(r.reduce_bytes_per_s / 1e9, "%.3f"), link ? dat_number(link->launch * 1e6, "%.4g") : "-",
                            link ? dat_number(link->alpha * 1e6, "%.4g") : "-",
                            link ? dat_number(link->bytes_per_s / 1e9, "%.4g") : "-", link ? dat_integer(link->points) : "-",
                            link ? dat_number(100 * link->max_rel_err, "%.1f") : "-"}}});
  return t;
}

}  // namespace shardlab
