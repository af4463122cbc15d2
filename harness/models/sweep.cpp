#include "harness/models/sweep.hpp"

#include <map>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <regex>
#include <sstream>
#include <unistd.h>

#include "core/blas.hpp"
#include "core/memory.hpp"
#include "core/einsum.hpp"
#include "core/error.hpp"
#include "core/write_file.hpp"
#include "harness/models/memory_scaling.hpp"
#include "core/text.hpp"
#include "harness/bench/bench.hpp"
#include "harness/cost/cost.hpp"
#include "harness/cost/topology.hpp"
#include "harness/models/ffn.hpp"
#include "harness/models/pipeline.hpp"
#include "harness/models/zero.hpp"
#include "harness/cost/machine.hpp"
#include "harness/models/step_cost.hpp"

namespace shardlab {

namespace {

std::string num(double v, const char* format = "%.6g") { return std::isnan(v) ? "-" : format_number(v, format); }
std::string integer(std::size_t v) { return std::to_string(v); }

// "X=2,Y=4" -> "2x4"; "D=8" -> "8".
std::string short_mesh(const Mesh& m) {
  std::vector<std::string> parts;
  for (int s : m.sizes()) parts.push_back(std::to_string(s));
  return join(parts, "x");
}

std::string mesh_for(const FfnStrategy& s, int devices) {
  return s.mesh_axes == 2 ? two_axis_mesh(devices) : "D=" + std::to_string(devices);
}

std::string dims_note(DType t) {
  return dtype_text(t) + "; bytes are those one device sends (all devices of a group send alike)";
}

// Meshes a strategy could not take at these dims, one note line per strategy.
struct Skipped {
  std::vector<std::pair<std::string, std::vector<std::string>>> by_strategy;
  void add(const std::string& strategy, const std::string& mesh) {
    for (auto& [s, meshes] : by_strategy)
      if (s == strategy) return meshes.push_back(mesh);
    by_strategy.push_back({strategy, {mesh}});
  }
  void notes(std::vector<std::string>& out) const {
    for (const auto& [s, meshes] : by_strategy)
      out.push_back("'-': " + s + " cannot shard these dims on " + join(meshes, ", ") +
                    " (a dim does not divide, or the mesh is too small)");
  }
};

}  // namespace

// ---- DatTable ----

std::string DatTable::text() const {
  std::vector<std::size_t> width(columns.size(), 0);
  for (std::size_t c = 0; c < columns.size(); ++c) width[c] = columns[c].size();
  for (const auto& b : blocks)
    for (const auto& r : b.rows)
      for (std::size_t c = 0; c < r.size() && c < width.size(); ++c) width[c] = std::max(width[c], r[c].size());
  auto line = [&](const std::vector<std::string>& cells, const std::string& lead) {
    std::string out = lead;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      if (c) out += "  ";
      out += std::string(width[c] > cells[c].size() ? width[c] - cells[c].size() : 0, ' ') + cells[c];
    }
    return out + "\n";
  };
  std::string out;
  for (const auto& n : notes) out += "# " + n + "\n";
  std::string numbered;
  for (std::size_t c = 0; c < columns.size(); ++c)
    numbered += (c ? ", " : "") + std::to_string(c + 1) + " " + columns[c];
  out += "# columns: " + numbered + "\n";
  out += line(columns, "# ");
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    if (b) out += "\n\n";  // gnuplot: the next index
    if (blocks.size() > 1 || !blocks[b].title.empty())
      out += "# block " + std::to_string(b) + " (gnuplot index " + std::to_string(b) + "): " + blocks[b].title + "\n";
    for (const auto& r : blocks[b].rows) out += line(r, "  ");
  }
  return out;
}

std::size_t DatTable::column(const std::string& n) const {
  for (std::size_t c = 0; c < columns.size(); ++c)
    if (columns[c] == n) return c;
  throw Error(ErrorKind::parse, name + ".dat has no column " + n);
}

double DatTable::number(std::size_t block, std::size_t row, const std::string& col) const {
  const std::size_t c = column(col);
  if (block >= blocks.size() || row >= blocks[block].rows.size())
    throw Error(ErrorKind::parse, name + ".dat has no row " + std::to_string(row) + " in block " + std::to_string(block));
  const std::string& cell = blocks[block].rows[row].at(c);
  if (cell == "-") return std::numeric_limits<double>::quiet_NaN();
  return std::stod(cell);
}

// ---- meshes ----

std::vector<int> sweep_device_counts(int max_devices) {
  if (max_devices < 1 || max_devices > 4096)
    throw Error(ErrorKind::parse, "--max-devices is " + std::to_string(max_devices) + "; use 1 to 4096");
  std::vector<int> out;
  for (int n = 1; n <= max_devices; n *= 2) out.push_back(n);
  return out;
}

std::string two_axis_mesh(int devices) {
  int x = 1, y = 1;
  while (x * y < devices) (y == x ? y : x) *= 2;  // Y first: 1x2, 2x2, 2x4, 4x4 ...
  if (x * y != devices)
    throw Error(ErrorKind::parse, "a 2-D sweep mesh needs a power-of-two device count, not " + std::to_string(devices));
  return "X=" + std::to_string(x) + ",Y=" + std::to_string(y);
}

// ---- bytes and memory per device ----

DatTable bytes_sweep(const std::string& dims_text, int max_devices, DType dtype) {
  const FfnDims dims = parse_ffn_dims(dims_text);
  const auto& strategies = ffn_strategies();
  DatTable t;
  t.name = "bytes_per_device";
  t.notes = {"shardlab sweep: bytes sent per device by one FFN step, predicted by plan_ffn (not run), " +
                 ffn_dims_text(dims),
             dims_note(dtype),
             "*_B = forward + backward (a training step); *_fwd_B = forward alone (inference)",
             "1-D strategies on mesh D=<devices>; gspmd on the 2-D mesh in column 2 (X = batch, Y = embed/hidden)"};
  t.columns = {"devices", "gspmd_mesh"};
  for (const auto& s : strategies) t.columns.push_back(s.name + "_B");
  for (const auto& s : strategies) t.columns.push_back(s.name + "_fwd_B");
  Skipped skipped;
  DatBlock block;
  for (int n : sweep_device_counts(max_devices)) {
    std::vector<std::string> total, fwd;
    for (const auto& s : strategies) {
      const Mesh mesh = Mesh::parse(mesh_for(s, n));
      try {
        FfnConfig c;
        c.strategy = s.name;
        c.dims = dims;
        c.backward = true;
        c.dtype = dtype;
        const FfnPlan p = plan_ffn(mesh, c);
        total.push_back(integer(p.predicted_bytes_per_device()));
        fwd.push_back(integer(p.predicted_bytes_per_device(FfnPhase::forward)));
      } catch (const Error&) {
        skipped.add(s.name, short_mesh(mesh));
        total.push_back("-");
        fwd.push_back("-");
      }
    }
    std::vector<std::string> row = {std::to_string(n), short_mesh(Mesh::parse(two_axis_mesh(n)))};
    row.insert(row.end(), total.begin(), total.end());
    row.insert(row.end(), fwd.begin(), fwd.end());
    block.rows.push_back(row);
  }
  skipped.notes(t.notes);
  t.blocks.push_back(block);
  return t;
}

DatTable bubble_sweep() {
  DatTable t;
  t.name = "bubble";
  t.notes = {"shardlab sweep: pipeline bubble of GPipe runs (sim backend, 2 layers per stage), measured on the logical "
             "clock (one tick per forward or backward) from the order each device ran, and the formula (P-1)/(m+P-1)"};
  const std::vector<int> stages = {2, 4, 8};
  t.columns = {"chunks"};
  for (int p : stages) t.columns.insert(t.columns.end(), {"P" + std::to_string(p) + "_measured", "P" + std::to_string(p) + "_formula"});
  DatBlock block;
  Runtime rt(Backend::sim);
  for (int m : {1, 2, 4, 8, 16, 32}) {
    std::vector<std::string> row = {std::to_string(m)};
    for (int p : stages) {
      PipelineConfig c;
      c.stages = p;
      c.chunks = m;
      c.layers = 2 * p;
      const PipeInputs in = pipeline_inputs(c);
      const RunResult run = rt.run(Mesh::parse("X=" + std::to_string(p)), pipeline_program(c, in));
      row.push_back(format_number(bubble_fraction(logical_clock(executed_orders(run, p)), p), "%.6f"));
      row.push_back(format_number(bubble_formula(p, m), "%.6f"));
    }
    block.rows.push_back(row);
  }
  t.blocks.push_back(block);
  return t;
}

DatTable zero_sweep(double params, int max_devices) {
  DatTable t;
  t.name = "zero_memory";
  t.notes = {"shardlab sweep: memory per device of plain data parallelism and ZeRO stages 1-3 (formulas of "
             "harness/models/zero.hpp), " + format_number(params / 1e9, "%g") + "B parameters, mixed-precision Adam "
             "(2 + 2 + 12 bytes per parameter); GB = 1e9 bytes",
             "the ZeRO paper's example: 7.5B on 64 devices holds 120, 31.4, 16.6 and 1.9 GB"};
  t.columns = {"devices", "dp_GB", "zero1_GB", "zero2_GB", "zero3_GB"};
  DatBlock block;
  for (int n = 1; n <= max_devices; n *= 2) {
    std::vector<std::string> row = {std::to_string(n)};
    for (const auto& s : zero_stages(params, n, "adam")) row.push_back(format_number(s.memory_bytes() / 1e9, "%.4f"));
    block.rows.push_back(row);
  }
  t.blocks.push_back(block);
  return t;
}

DatTable memory_sweep(const std::string& dims_text, int max_devices, DType dtype) {
  const FfnDims dims = parse_ffn_dims(dims_text);
  const auto& strategies = ffn_strategies();
  DatTable t;
  t.name = "memory_per_device";
  t.notes = {"shardlab sweep: memory per device of one FFN training step (forward + backward), predicted by "
             "plan_ffn (not run), " + ffn_dims_text(dims),
             dtype_text(dtype) + ". *_peak_B: the most a device holds while a stage runs (its live blocks plus "
             "gather buffers); *_stored_B: the most its live blocks take between stages",
             "unsharded_*: the same step on one device with whole tensors (the line sharding must beat)",
             "1-D strategies on mesh D=<devices>; gspmd on the 2-D mesh in column 2",
             "gspmd_run_*: measured by running the step on a sim mesh of that many devices (each device "
             "counts what it holds; equal to the plan or the sweep fails); '-' where not run (too large)"};
  t.columns = {"devices", "gspmd_mesh"};
  for (const auto& s : strategies) t.columns.push_back(s.name + "_peak_B");
  for (const auto& s : strategies) t.columns.push_back(s.name + "_stored_B");
  t.columns.insert(t.columns.end(), {"unsharded_peak_B", "unsharded_stored_B", "gspmd_run_peak_B", "gspmd_run_stored_B"});
  FfnConfig run_config;
  run_config.strategy = "gspmd";
  run_config.dims = dims;
  run_config.backward = true;
  run_config.dtype = dtype;
  run_config.finite_differences = false;
  std::map<int, MemoryPoint> measured;
  for (const MemoryPoint& p : memory_scaling(run_config, max_devices))
    if (p.measured) measured[p.devices] = p;
  Skipped skipped;
  DatBlock block;
  for (int n : sweep_device_counts(max_devices)) {
    std::vector<std::string> peak, stored, whole = {"-", "-"};
    for (const auto& s : strategies) {
      const Mesh mesh = Mesh::parse(mesh_for(s, n));
      try {
        FfnConfig c;
        c.strategy = s.name;
        c.dims = dims;
        c.backward = true;
        c.dtype = dtype;
        const FfnPlan p = plan_ffn(mesh, c);
        peak.push_back(integer(p.peak_bytes_per_device));
        stored.push_back(integer(p.stored_bytes_per_device));
        whole = {integer(p.unsharded_peak_bytes), integer(p.unsharded_stored_bytes)};
      } catch (const Error&) {
        skipped.add(s.name, short_mesh(mesh));
        peak.push_back("-");
        stored.push_back("-");
      }
    }
    std::vector<std::string> row = {std::to_string(n), short_mesh(Mesh::parse(two_axis_mesh(n)))};
    row.insert(row.end(), peak.begin(), peak.end());
    row.insert(row.end(), stored.begin(), stored.end());
    row.insert(row.end(), whole.begin(), whole.end());
    const auto run = measured.find(n);
    row.push_back(run == measured.end() ? "-" : integer(run->second.peak));
    row.push_back(run == measured.end() ? "-" : integer(run->second.held));
    block.rows.push_back(row);
  }
  skipped.notes(t.notes);
  t.blocks.push_back(block);
  return t;
}

// ---- modeled communication share ----

namespace {

// mesh, devices, then per preset: forward comm, compute, share; training comm, compute, share.
std::vector<std::string> share_row(const FfnPlan& p, int devices, const std::vector<Hardware>& presets) {
  std::vector<std::string> row = {short_mesh(p.mesh), std::to_string(devices)};
  for (const auto& h : presets)
    for (bool backward : {false, true}) {
      const StepCost c = ffn_step_cost(p, backward, h);
      row.insert(row.end(), {num(c.comm_seconds * 1e3), num(c.compute_seconds * 1e3), num(100 * c.share(), "%.2f")});
    }
  return row;
}

FfnPlan plan_step(const std::string& strategy, const Mesh& mesh, const FfnDims& dims) {
  FfnConfig c;
  c.strategy = strategy;
  c.dims = dims;
  c.backward = true;
  return plan_ffn(mesh, c);
}

}  // namespace

DatTable share_sweep(const std::string& dims_text, int max_devices, const std::vector<Hardware>* preset_list) {
  const FfnDims dims = parse_ffn_dims(dims_text);
  const auto& presets = preset_list ? *preset_list : hardware_presets();
  DatTable t;
  t.name = "comm_share";
  t.notes = {"shardlab sweep: modeled communication share of one FFN step, " + ffn_dims_text(dims) +
                 " (article 001's sizes by default), from plan_ffn's collectives and FLOPs (nothing allocated)",
             "comm = sum over the step's collectives of topology_seconds (alpha-beta-gamma on the preset's wiring, "
             "harness/cost/topology.hpp), data in the preset's element size; compute = matmul FLOPs per device / the preset's rate",
             "share_pct = 100 comm / (comm + compute): nothing overlapped, elementwise work not counted; "
             "fwd = forward (inference, as the article's ~20% on a TPUv2-8), train = forward + backward",
             "one block per strategy (gnuplot index); 1-D strategies on D=<devices>, gspmd on XxY; then gspmd on every "
             "shape XxY of 8 and of 64 devices"};
  for (const auto& h : presets)
    t.notes.push_back("preset " + h.name + ": " + h.description + "; launch " + num(h.launch * 1e6, "%.3g") + " us, alpha " + num(h.alpha * 1e6, "%.3g") + " us, " +
                      num(h.bytes_per_s / 1e9, "%.4g") + " GB/s link, " + num(h.flops_per_s / 1e12, "%.4g") +
                      " TFLOP/s, " + num(h.element_bytes, "%.0f") + " B/element, " + topology_text(h));
  t.columns = {"mesh", "devices"};
  for (const auto& h : presets)
    for (const char* c : {"_fwd_comm_ms", "_fwd_compute_ms", "_fwd_pct", "_train_comm_ms", "_train_compute_ms",
                          "_train_pct"})
      t.columns.push_back(h.name + c);
  Skipped skipped;
  for (const auto& s : ffn_strategies()) {
    DatBlock block;
    block.title = s.name + ": " + s.description;
    for (int n : sweep_device_counts(max_devices)) {
      if (n == 1) continue;
      const Mesh mesh = Mesh::parse(mesh_for(s, n));
      FfnPlan p;
      try {
        p = plan_step(s.name, mesh, dims);
      } catch (const Error&) {
        skipped.add(s.name, short_mesh(mesh));
        continue;
      }
      block.rows.push_back(share_row(p, n, presets));
    }
    t.blocks.push_back(block);
  }
  // The same device count cut into different shapes: how the split between batch (X) and
  // embed/hidden (Y) trades the gathers of weights over X against those of activations over Y.
  for (int n : {8, 64}) {
    if (n > max_devices) continue;
    DatBlock block;
    block.title = "gspmd_shapes_" + std::to_string(n) + ": gspmd on every X x Y of " + std::to_string(n) + " devices";
    for (int x = 1; x <= n; x *= 2) {
      const Mesh mesh = Mesh::parse("X=" + std::to_string(x) + ",Y=" + std::to_string(n / x));
      FfnPlan p;
      try {
        p = plan_step("gspmd", mesh, dims);
      } catch (const Error&) {
        skipped.add("gspmd_shapes_" + std::to_string(n), short_mesh(mesh));
        continue;
      }
      block.rows.push_back(share_row(p, n, presets));
    }
    t.blocks.push_back(block);
  }
  for (const auto& [s, meshes] : skipped.by_strategy)
    t.notes.push_back(s + " left out on " + join(meshes, ", ") + ": the dims do not divide");
  return t;
}

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
      fitted ? "fit: launch " + num(fit.launch * 1e6, "%.3g") + " us, alpha " + num(fit.alpha * 1e6, "%.3g") + " us, link " +
                   num(fit.bytes_per_s / 1e9, "%.3g") + " GB/s, within " + num(100 * fit.max_rel_err, "%.0f") + "% over " +
                   integer(fit.points) + " sizes: fitted to this run's ours all_reduce, all_gather and reduce_scatter " +
                   "(the preset's reduction rate)" + launch_note(fit)
             : "fit: '-' (this run has no collective with two sizes or more, or their times do not grow with size)");
  t.notes.push_back("preset: launch " + num(hw.launch * 1e6, "%.3g") + " us, alpha " + num(hw.alpha * 1e6, "%.3g") + " us, link " + num(hw.bytes_per_s / 1e9, "%.3g") +
                    " GB/s (this-machine: " + hw.description + ")");
  t.columns = {"size_B", "ours_us", "ours_busbw_GBps", "native_us", "native_busbw_GBps", "model_us",
               "model_busbw_GBps", "fit_us", "fit_busbw_GBps"};
  for (const auto& row : r.rows) {
    if (t.blocks.empty() || t.blocks.back().title != row.op) t.blocks.push_back({row.op, {}});
    const double f = bus_factor(row.op, r.group_size);
    auto bw = [&](double s) { return s > 0 ? num(row.bytes / s * f / 1e9, "%.4f") : "-"; };
    auto us = [&](double s) { return s > 0 ? num(s * 1e6, "%.2f") : "-"; };
    const Algorithm algo = row.op == "all_to_all" ? Algorithm::pairwise : Algorithm::ring;
    const double model = collective_seconds(row.op, algo, r.group_size, double(row.bytes), hw);
    const double run_model = fitted ? collective_seconds(row.op, algo, r.group_size, double(row.bytes), run_hw) : -1;
    t.blocks.back().rows.push_back({integer(row.bytes), us(row.ours_seconds), bw(row.ours_seconds),
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
             "gemm: best of repeated " + integer(r.gemm_n) + "x" + integer(r.gemm_n) +
                 " matmul (core/einsum.hpp, OpenBLAS), 2 x " + integer(r.gemm_n) + "^3 FLOPs; reduce: best of repeated acc[i] += in[i] over " +
                 integer(r.reduce_bytes) + " B (the ring's reduction loop), bytes of `in` per second",
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
  t.blocks.push_back({"", {{integer(r.gemm_n), num(r.gemm_flops_per_s / 1e9, "%.3f"), integer(r.reduce_bytes),
                            num(r.reduce_bytes_per_s / 1e9, "%.3f"), link ? num(link->launch * 1e6, "%.4g") : "-",
                            link ? num(link->alpha * 1e6, "%.4g") : "-",
                            link ? num(link->bytes_per_s / 1e9, "%.4g") : "-", link ? integer(link->points) : "-",
                            link ? num(100 * link->max_rel_err, "%.1f") : "-"}}});
  return t;
}

// ---- files ----

std::vector<std::string> write_dat_files(const std::string& dir, const std::vector<DatTable>& tables) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw Error(ErrorKind::io, "--out " + dir + " is a file, not a directory");
  const bool created = !fs::exists(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) throw Error(ErrorKind::io, "cannot create directory " + dir + ": " + ec.message());
  std::vector<std::string> temps, finals;
  auto drop_temps = [&] {  // and the directory, when this run made it: nothing is left behind
    for (const auto& t : temps) fs::remove(t, ec);
    if (created) fs::remove(dir, ec);
  };
  try {
    for (const auto& t : tables)  // first: never rename over a device node or a directory
      check_writable((fs::path(dir) / (t.name + ".dat")).string(), "sweep table");
  } catch (const Error&) {
    drop_temps();
    throw;
  }
  for (const auto& t : tables) {
    const std::string final_path = (fs::path(dir) / (t.name + ".dat")).string();
    const std::string temp = (fs::path(dir) / ("." + t.name + ".dat.tmp." + std::to_string(::getpid()))).string();
    temps.push_back(temp);
    std::ofstream f(temp, std::ios::binary);
    f << t.text();
    f.close();
    if (!f) {
      drop_temps();
      throw Error(ErrorKind::fault, "cannot write " + final_path + " (disk full?)");
    }
    finals.push_back(final_path);
  }
  for (std::size_t i = 0; i < temps.size(); ++i) {
    fs::rename(temps[i], finals[i], ec);
    if (ec) {
      const std::string why = ec.message();  // before drop_temps reuses ec
      drop_temps();
      throw Error(ErrorKind::fault, "cannot rename " + temps[i] + " to " + finals[i] + ": " + why);
    }
  }
  return finals;
}

}  // namespace shardlab
