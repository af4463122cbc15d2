#include "harness/models/bench_memory.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "collectives/runtime.hpp"
#include "core/blas.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/mesh.hpp"
#include "core/text.hpp"
#include "harness/models/ffn.hpp"
#include "core/table.hpp"

namespace shardlab {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

std::vector<MemoryBenchRow> run_memory_bench(const MemoryBenchOptions& o) {
  if (o.iters < 1 || o.iters > 1000)
    throw Error(ErrorKind::parse, "--iters is " + std::to_string(o.iters) + "; use 1 to 1000");
  FfnConfig config;
  config.dims = parse_ffn_dims(o.dims);
  config.backward = true;
  config.finite_differences = false;
  std::vector<const FfnStrategy*> strategies;
  for (const auto& name : split(o.strategies, ',')) strategies.push_back(&ffn_strategy(trim(name)));
  std::vector<Mesh> meshes;
  for (const FfnStrategy* s : strategies) {
    meshes.push_back(Mesh::parse(ffn_default_mesh(*s)));
    config.strategy = s->name;
    plan_ffn(meshes.back(), config);  // the dims must divide: exit 2 before any timing
  }

  Runtime rt(Backend::sim);
  std::vector<MemoryBenchRow> rows;
  for (std::size_t i = 0; i < strategies.size(); ++i) {
    config.strategy = strategies[i]->name;
    MemoryBenchRow row;
    row.strategy = config.strategy;
    row.mesh = meshes[i].text();
    std::vector<double> released, kept;
    // Each timed step follows an untimed one in the same mode, so that each is timed in its own
    // steady state (a kept heap right after a released step would still be cold).
    for (int k = 0; k < o.iters; ++k)
      for (bool keep : {false, true}) {
        keep_freed_memory(keep);
        for (bool timed : {false, true}) {
          const auto t0 = std::chrono::steady_clock::now();
          const FfnResult r = run_ffn(rt, meshes[i], config);
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          row.pass = row.pass && r.pass();
          if (timed) (keep ? kept : released).push_back(s);
        }
      }
    keep_freed_memory(true);
    row.released_seconds = median(released);
    row.kept_seconds = median(kept);
    rows.push_back(row);
  }
  return rows;
}

int bench_memory(const MemoryBenchOptions& o) {
  const std::vector<MemoryBenchRow> rows = run_memory_bench(o);
  const bool pass = std::all_of(rows.begin(), rows.end(), [](const MemoryBenchRow& r) { return r.pass; });
  std::vector<std::string> ratios;
  for (const auto& r : rows) ratios.push_back(format_number(r.released_seconds / r.kept_seconds, "%.2f") + " " + r.strategy);
  if (o.json) {
    nlohmann::ordered_json j;
    j["bench"] = "memory";
    j["dims"] = o.dims;
    j["iters"] = o.iters;
    j["blas"] = blas_description();
    j["rows"] = nlohmann::ordered_json::array();
    for (const auto& r : rows)
      j["rows"].push_back({{"strategy", r.strategy},
                           {"mesh", r.mesh},
                           {"released_seconds", r.released_seconds},
                           {"kept_seconds", r.kept_seconds},
                           {"released_over_kept", r.released_seconds / r.kept_seconds},
                           {"pass", r.pass}});
    j["pass"] = pass;
    std::cout << j.dump(2) << "\n";
    return pass ? 0 : 1;
  }
  std::cout << "# shardlab bench memory: one FFN training step (forward + backward), sim backend, dims " << o.dims
            << "\n# BLAS: " << blas_description()
            << "\n# released: glibc's thresholds fixed at 128 KiB (freed blocks go back to the kernel, the next tensor"
               " faults its pages in); kept: core/memory.hpp's keep_freed_memory(), as every Runtime runs"
            << "\n# median seconds per step of " << o.iters
            << ", the two modes taking turns, each timed step after an untimed one in its mode; timings mean little while "
               "the machine is busy\n";
  Table t({"strategy", "mesh", "released_s", "kept_s", "released/kept", "verified"});
  for (const auto& r : rows)
    t.add({r.strategy, r.mesh, format_number(r.released_seconds, "%.4f"), format_number(r.kept_seconds, "%.4f"),
           format_number(r.released_seconds / r.kept_seconds, "%.2f"), r.pass ? "yes" : "NO"});
  std::cout << t.text();
  std::cout << (pass ? "bench memory: released/kept " : "FAIL bench memory: a step did not verify; released/kept ")
            << join(ratios, ", ") << "\n";
  return pass ? 0 : 1;
}

}  // namespace shardlab
