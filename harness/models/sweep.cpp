// The model's sweeps (harness/models/sweep.hpp): bytes, memory, ZeRO, pipeline bubble and
// communication share against device count. The .dat format and its files are in dat_table.cpp,
// the measured tables (busbw, machine.dat) in sweep_machine.cpp.
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
        total.push_back(dat_integer(p.predicted_bytes_per_device()));
        fwd.push_back(dat_integer(p.predicted_bytes_per_device(FfnPhase::forward)));
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
        peak.push_back(dat_integer(p.peak_bytes_per_device));
        stored.push_back(dat_integer(p.stored_bytes_per_device));
        whole = {dat_integer(p.unsharded_peak_bytes), dat_integer(p.unsharded_stored_bytes)};
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
    row.push_back(run == measured.end() ? "-" : dat_integer(run->second.peak));
    row.push_back(run == measured.end() ? "-" : dat_integer(run->second.held));
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
      row.insert(row.end(), {dat_number(c.comm_seconds * 1e3), dat_number(c.compute_seconds * 1e3), dat_number(100 * c.share(), "%.2f")});
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
    t.notes.push_back("preset " + h.name + ": " + h.description + "; launch " + dat_number(h.launch * 1e6, "%.3g") + " us, alpha " + dat_number(h.alpha * 1e6, "%.3g") + " us, " +
                      dat_number(h.bytes_per_s / 1e9, "%.4g") + " GB/s link, " + dat_number(h.flops_per_s / 1e12, "%.4g") +
                      " TFLOP/s, " + dat_number(h.element_bytes, "%.0f") + " B/element, " + topology_text(h));
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

}  // namespace shardlab
