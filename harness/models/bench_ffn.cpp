#include "harness/models/bench_ffn.hpp"
#include "harness/check/progress.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cmath>
#include <iostream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "collectives/runtime.hpp"
#include "core/blas.hpp"
#include "core/dtype.hpp"
#include "core/gemm.hpp"
#include "core/memory.hpp"
#include "core/text.hpp"
#include "core/trace.hpp"
#include "core/wrap.hpp"
#include "harness/check/checks_json.hpp"
#include "harness/check/report.hpp"
#include "harness/models/ffn.hpp"
#include "core/table.hpp"
#include "harness/check/trace.hpp"
#include "core/write_file.hpp"

namespace shardlab {

namespace {

// One row a check: what it compares, its verdict (WEAK: passed with power above the floor), the
// largest error and tolerance, and its power ("exact" or "3.7e-06 x RMS", verify.hpp's power_cell).
std::string checks_table(const std::vector<Verdict>& checks, DType t) {
  Table table({"check", "verdict", "max err", "tol", "catches"});
  auto g = [](double x) { return format_number(x, "%.3g"); };
  for (const auto& c : checks)
    table.add({c.name, !c.pass ? "FAIL" : is_weak(c, t) ? "WEAK" : "PASS", g(c.max_abs_error), g(c.tolerance),
               power_cell(c)});
  return table.text();
}

// The one-core GEMM rate by the wall clock, and by the calling thread's CPU time (the rate while it
// runs, whatever else shares the core): the best of 3 calls after a warm-up.
struct GemmRates {
  double wall = 0, cpu = 0;
};

template <class T>
GemmRates gemm_rates(std::size_t n) {
  std::vector<T> a(n * n, T(0.5)), b(n * n, T(0.25)), c(n * n);
  GemmRates best;
  for (int rep = 0; rep < 4; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = thread_cpu_seconds();
    batched_gemm(1, n, n, n, a.data(), false, b.data(), false, c.data());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = thread_cpu_seconds() - c0;
    if (rep == 0) continue;  // the first call warms up
    best.wall = std::max(best.wall, 2.0 * n * n * n / s / 1e9);
    if (cpu > 0) best.cpu = std::max(best.cpu, 2.0 * n * n * n / cpu / 1e9);
  }
  return best;
}

GemmRates single_core_rates(const std::string& dtype, std::size_t n = 1536) {
  use_one_blas_thread();
  return parse_dtype(dtype) == DType::float64 ? gemm_rates<double>(n) : gemm_rates<float>(n);
}

double peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0;
}

std::string secs(double s) { return format_number(s, "%.2f") + " s"; }

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// One row per step: the cold first (the sharded run) and each warm one, with its GFLOP/s per
// device beside the one-core rate, and its time over the floor.
std::string steps_table(double first, const std::vector<double>& warm, double flops_per_device, double rate,
                        double floor) {
  Table t({"step", "wall", "GFLOP/s per device", "/ one core", "/ floor"});
  auto row = [&](const std::string& name, double s) {
    const double g = flops_per_device / s / 1e9;
    t.add({name, secs(s), format_number(g, "%.3g"), format_number(g / rate, "%.3g"), format_number(s / floor, "%.2f")});
  };
  row("1 (cold)", first);
  for (std::size_t i = 0; i < warm.size(); ++i) row(std::to_string(i + 2) + " (warm)", warm[i]);
  return t.text();
}

}  // namespace

double single_core_gemm_gflops(const std::string& dtype, std::size_t n) { return single_core_rates(dtype, n).wall; }

double ffn_floor_seconds(const FfnPlan& plan, double one_core_gflops) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return plan.flops_per_device() * plan.mesh.devices() / (one_core_gflops * 1e9 * cores);
}

namespace {

// What bench ffn measured and the figures it derives, for its JSON and its text.
struct Figures {
  unsigned cores = 1;
  double rate = 0, floor = 0;    // one core's GFLOP/s; the FLOP floor of the sharded run
  double total = 0, flops = 0, ratio = 0;  // seconds without the warm steps; FLOPs; sharded / floor
  double planned = 0, rss = 0;   // bytes the plan says this process needs; its peak RSS
  TouchRates touch;
  double touch_seconds = 0, warm_median = 0, cold_limit = 0;
  // The same step in CPU time: the process's CPU seconds against the FLOPs at the one-core CPU
  // rate. Time other jobs take from the cores is in neither, so on a shared machine this says what
  // of the step is shardlab's own work beyond its GEMMs.
  double cpu_rate = 0, cpu_floor = 0, warm_cpu = 0;
};

void print_json(const FfnPlan& plan, const FfnConfig& config, const Mesh& mesh, const FfnResult& r, const Figures& f,
                DType dtype, int steps) {
  nlohmann::ordered_json j;
  j["case"] = "bench ffn";
  j["strategy"] = plan.strategy.name;
  j["mesh"] = mesh.text();
  j["dims"] = ffn_dims_text(config.dims);
  j["backward"] = config.backward;
  j["dtype"] = dtype_name(dtype);
  j["element_bytes"] = element_bytes(dtype);
  j["kernels"] = blas_description();
  j["verify"] = r.verify;
  j["pass"] = r.pass();
  j["seconds_inputs"] = r.seconds_inputs;
  j["seconds_run"] = r.seconds_run;
  j["seconds_verify"] = r.seconds_verify;
  j["seconds_total"] = f.total;
  j["single_core_gflops"] = f.rate;
  j["cores"] = f.cores;
  j["flops"] = f.flops;
  j["floor_seconds"] = f.floor;
  j["sharded_over_floor"] = f.ratio;
  j["total_over_floor"] = f.total / f.floor;
  j["first_touch_bytes_per_s"] = f.touch.first;
  j["touch_again_bytes_per_s"] = f.touch.again;
  j["first_touch_seconds"] = f.touch_seconds;
  j["total_over_floor_and_touch"] = f.total / (f.floor + f.touch_seconds);
  j["devices"] = mesh.devices();
  j["steps"] = steps;
  j["step_seconds"] = r.seconds_steps;
  std::vector<double> per_device;
  for (double s : r.seconds_steps) per_device.push_back(plan.flops_per_device() / s / 1e9);
  j["step_gflops_per_device"] = per_device;
  j["first_gflops_per_device"] = plan.flops_per_device() / r.seconds_run / 1e9;
  if (!r.seconds_steps.empty()) j["warm_over_floor"] = f.warm_median / f.floor;  // the median warm step
  j["single_core_cpu_gflops"] = f.cpu_rate;
  j["step_cpu_seconds"] = r.cpu_seconds_steps;
  if (!r.cpu_seconds_steps.empty() && f.cpu_floor > 0) j["warm_cpu_over_cpu_floor"] = f.warm_cpu / f.cpu_floor;
  j["first_over_cold_limit"] = r.seconds_run / f.cold_limit;
  j["peak_rss_bytes"] = f.rss;
  j["planned_bytes"] = f.planned;
  j["checks"] = checks_json(r.checks, dtype);
  std::cout << j.dump(2) << std::endl;
}

void print_text(const FfnPlan& plan, const FfnConfig& config, const Mesh& mesh, const FfnResult& r, const Figures& f,
                DType dtype) {
  std::cout << "shardlab bench ffn: " << plan.strategy.name << " on mesh " << mesh.text() << ", "
            << ffn_dims_text(config.dims) << ", " << (config.backward ? "forward + backward" : "forward") << "\n"
            << wrap_lines("  " + dtype_text(dtype) + "; " + blas_description()) << "\n"
            << "  one core: " << format_number(f.rate, "%.1f") << " GFLOP/s (" << (dtype == DType::float64 ? "dgemm" : "sgemm")
            << " " << 1536 << "^3, best of 3, measured now); " << f.cores << " cores\n\n";
  Table t({"phase", "wall", "note"});
  t.add({"inputs", secs(r.seconds_inputs), "x, W_in, W_out" + std::string(config.backward ? ", R" : "") + " generated in " + dtype_name(dtype)});
  t.add({"sharded run", secs(r.seconds_run), format_number(f.flops / 1e9, "%.0f") + " GFLOP on " +
                                                  std::to_string(mesh.devices()) + " devices"});
  t.add({"verification", secs(r.seconds_verify), r.verify});
  t.add({"total", secs(f.total), r.seconds_steps.empty() ? "" : "without the warm steps (below)"});
  std::cout << t.text() << "\n"
            << "  floor = FLOPs per device x devices / (one-core rate x cores) = " << secs(f.floor) << "\n"
            << "  sharded / floor = " << format_number(f.ratio, "%.2f") << ": the cold first step; target: at most "
            << secs(f.cold_limit) << " = 1.3 floor + first touch\n"
            << "  total / floor = " << format_number(f.total / f.floor, "%.2f")
            << ": inputs + sharded run + verification; target <= 1.5\n"
            << "  peak memory " << human_bytes(f.rss) << "; the plan: " << human_bytes(f.planned)
            << " (every device's peak + the unsharded layer) = " << format_number(f.rss / f.planned, "%.2f") << "x\n";
  if (f.touch.first > 0)
    std::cout << wrap_lines("  first touch: fresh memory is written at " + format_number(f.touch.first / 1e9, "%.2f") +
                            " GB/s here, " + format_number(f.touch.again / 1e9, "%.1f") +
                            " GB/s once touched (128 MiB, one core, measured now): the plan's " + human_bytes(f.planned) +
                            " cost at least " + secs(f.touch_seconds) + " on " + std::to_string(f.cores) +
                            " cores; total / (floor + that) = " + format_number(f.total / (f.floor + f.touch_seconds), "%.2f"))
              << "\n";
  if (!r.seconds_steps.empty())
    std::cout << "\n" << steps_table(r.seconds_run, r.seconds_steps, plan.flops_per_device(), f.rate, f.floor)
              << "  warm step / floor = " << format_number(f.warm_median / f.floor, "%.2f") << " (the median of "
              << r.seconds_steps.size() << " warm steps; target <= 1.15); " << mesh.devices() << " devices on "
              << f.cores << " cores\n";
  if (!r.cpu_seconds_steps.empty() && f.cpu_floor > 0)
    std::cout << wrap_lines("  in CPU time: the median warm step took " + secs(f.warm_cpu) + " of the process's CPU, " +
                            format_number(f.warm_cpu / f.cpu_floor, "%.2f") + "x its FLOPs at the one-core rate by CPU time (" +
                            format_number(f.cpu_rate, "%.1f") + " GFLOP/s): " + secs(f.cpu_floor) +
                            "; the wall ratio's excess over this is time the cores gave to others")
              << "\n";
  std::cout << "\n" << checks_table(r.checks, dtype);
  for (const auto& c : r.checks)
    if (!c.pass) std::cout << wrap_lines("  " + c.name + ": " + c.detail) << "\n";
  const PowerSummary ps = power_summary(r.checks, dtype);
  Report powers;
  powers.dtype = dtype;
  powers.checks = r.checks;
  std::cout << wrap_lines("  " + power_line(powers)) << "\n";
  std::string verdict = std::string(r.pass() ? "PASS" : "FAIL") + " bench ffn: " + r.verify + " verification, " +
                        checks_power_phrase(r.checks, dtype) + ", sharded/floor " + format_number(f.ratio, "%.2f") +
                        ", total " + secs(f.total);
  if (ps.weak > 0) verdict += "; " + std::to_string(ps.weak) + "/" + std::to_string(ps.compared) + " WEAK";
  std::cout << wrap_lines(verdict) << std::endl;  // within 100 columns, the power included
}

}  // namespace

int bench_ffn(const FfnBenchOptions& o) {
  const DType dtype = parse_dtype(o.dtype);
  FfnConfig config;
  config.strategy = ffn_strategy(o.strategy).name;
  config.dims = parse_ffn_dims(o.dims);
  config.backward = o.backward;
  config.dtype = dtype;
  config.verify = parse_verify_mode(o.verify);
  config.finite_differences = false;
  config.steps = o.steps;
  const Mesh mesh = Mesh::parse(o.mesh.empty() ? ffn_default_mesh(ffn_strategy(o.strategy)) : o.mesh);
  const FfnPlan plan = plan_ffn(mesh, config);  // bad dims or mesh fail here, before any work

  Figures f;
  f.cores = std::max(1u, std::thread::hardware_concurrency());
  const GemmRates rates = single_core_rates(o.dtype);
  f.rate = rates.wall;  // GFLOP/s, one core
  f.cpu_rate = rates.cpu;
  f.floor = ffn_floor_seconds(plan, f.rate);
  // On a terminal, each phase with the time left (the sharded run's estimate: the FLOP floor).
  progress::enable("bench ffn", !o.json);
  config.expected_run_seconds = f.floor;
  Runtime runtime(Backend::sim, false, dtype);
  if (!o.trace.empty()) {
    check_writable(o.trace, "trace");
    runtime.record_trace();
  }
  const auto t0 = std::chrono::steady_clock::now();
  const FfnResult r = run_ffn(runtime, mesh, config);
  // total: inputs + the first (verified) step + verification, without the warm steps timed apart.
  double warm_seconds = 0;
  for (double s : r.seconds_steps) warm_seconds += s;
  f.total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - warm_seconds;
  // The timeline is written after the results are printed: a failure then loses only itself.
  auto kept = [&](int status) {
    return o.trace.empty() ? status : std::max(status, keep_trace_file(o.trace, {TraceSource{"bench ffn " + o.strategy, runtime.trace()}}));
  };

  f.flops = plan.flops_per_device() * mesh.devices();
  f.ratio = r.seconds_run / f.floor;
  // What the plan says all devices hold at their peak, plus the whole layer once (the reference,
  // or for a sketch the gathered intermediates it checks): the memory this process should need.
  f.planned = static_cast<double>(plan.peak_bytes_per_device) * mesh.devices() +
              static_cast<double>(plan.unsharded_peak_bytes);
  f.rss = peak_rss_bytes();
  f.touch = touch_rates();  // after the peak is read, which it would raise
  // The plan's memory must be touched once, at the first-touch rate spread over the cores: a
  // cost the FLOP floor does not count (on this project's VMs 2 s of one core per GiB).
  f.touch_seconds = f.touch.first > 0 ? f.planned / f.touch.first / f.cores : 0;
  // The goals: a warm step within 1.15x the floor; the cold first within 1.3x the floor plus the
  // plan's first touch; inputs + sharded run + verification within 1.5x the floor.
  f.warm_median = median_of(r.seconds_steps);
  f.cold_limit = 1.3 * f.floor + f.touch_seconds;
  f.cpu_floor = rates.cpu > 0 ? f.flops / (rates.cpu * 1e9) : 0;
  f.warm_cpu = median_of(r.cpu_seconds_steps);

  if (o.json)
    print_json(plan, config, mesh, r, f, dtype, o.steps);
  else
    print_text(plan, config, mesh, r, f, dtype);
  return kept(r.pass() ? 0 : 1);
}

}  // namespace shardlab
