#include "harness/cli/bench_plan.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <random>

#include <nlohmann/json.hpp>

#include "core/einsum.hpp"
#include "core/error.hpp"
#include "core/table.hpp"
#include "core/text.hpp"
#include "core/trace.hpp"
#include "harness/plan/plan_search.hpp"

namespace shardlab {

namespace {

constexpr double kMedianTargetMs = 15, kMaxTargetMs = 50;  // CPU time per search

using Rng = std::mt19937_64;
int pick(Rng& rng, int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<std::uint64_t>(hi - lo + 1)); }

Spec random_spec(Rng& rng, const Mesh& mesh, std::size_t rank) {
  Spec s = Spec::replicated(rank);
  std::vector<std::string> axes = mesh.names();
  std::shuffle(axes.begin(), axes.end(), rng);
  for (const auto& ax : axes) {
    const int d = pick(rng, -1, static_cast<int>(rank) - 1);
    if (d >= 0) s.dims[static_cast<std::size_t>(d)].push_back(ax);
  }
  return s;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * double(v.size())))];
}

// The 1-minute load average, or -1 where /proc/loadavg cannot be read.
double load_average() {
  std::ifstream in("/proc/loadavg");
  double load = -1;
  return in >> load ? load : -1;
}

}  // namespace

std::vector<PlanBenchRow> run_plan_bench(const PlanBenchOptions& o) {
  if (o.cases < 1 || o.cases > 100000)
    throw Error(ErrorKind::parse, "--cases is " + std::to_string(o.cases) + "; use 1 to 100000");
  static const char* einsums[] = {"ik,kj->ij", "bik,bkj->bij", "bik,bkj->ibj", "ijk,kl->lij", "ik,kjl->ijl"};
  std::vector<PlanBenchRow> rows;
  for (const auto& text : split(o.meshes, ';')) {
    const Mesh mesh = Mesh::parse(trim(text));
    Rng rng(o.seed);
    PlanBenchRow row;
    row.mesh = mesh.text();
    std::vector<double> ms, cpu_ms, layouts;
    for (int i = 0; i < o.cases; ++i) {
      const Einsum eq = Einsum::parse(einsums[pick(rng, 0, 4)]);
      const Operand a{"A", random_spec(rng, mesh, eq.a.size()), Shape(eq.a.size(), 256)};
      const Operand b{"B", random_spec(rng, mesh, eq.b.size()), Shape(eq.b.size(), 256)};
      std::optional<Spec> out;
      if (pick(rng, 0, 1)) out = random_spec(rng, mesh, eq.out.size());
      const auto start = std::chrono::steady_clock::now();
      const double cpu_start = thread_cpu_seconds();
      SearchResult r;
      try {
        r = search_contraction(eq, mesh, a, b, out, PlanOptions{false, "C", 4});
      } catch (const Error&) {
        ++row.refused;
        continue;
      }
      const double cpu = 1e3 * (thread_cpu_seconds() - cpu_start);
      const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      ms.push_back(t);
      cpu_ms.push_back(cpu);
      layouts.push_back(double(r.layouts_explored));
      row.max_ms = std::max(row.max_ms, t);
      if (cpu >= row.cpu_max_ms) {
        row.cpu_max_ms = cpu;
        std::string dims;
        for (char c : eq.a + eq.b)
          if (dims.find(std::string(1, c) + "=") == std::string::npos) dims += (dims.empty() ? "" : ",") + std::string(1, c) + "=256";
        row.slowest = "'" + eq.text() + "' --mesh " + mesh.text() + " --specs '" + a.spec.text() + "' '" + b.spec.text() +
                      "' --dims " + dims + (out ? " --out-spec '" + out->text() + "'" : "") + " --plan-only";
      }
      row.max_layouts = std::max(row.max_layouts, r.layouts_explored);
    }
    row.searched = static_cast<int>(ms.size());
    // A time over no search would be a figure measured on nothing: refuse it.
    if (row.searched == 0)
      throw Error(ErrorKind::parse, "bench plan searched nothing on mesh " + mesh.text() + ": all " +
                                        std::to_string(row.refused) + " random cases were refused (dims of 256 do not " +
                                        "split over its axes); give meshes whose axis sizes divide 256");
    row.median_ms = quantile(ms, 0.5);
    row.p95_ms = quantile(ms, 0.95);
    row.cpu_median_ms = quantile(cpu_ms, 0.5);
    row.cpu_p95_ms = quantile(cpu_ms, 0.95);
    row.median_layouts = static_cast<std::size_t>(quantile(layouts, 0.5));
    rows.push_back(row);
  }
  return rows;
}

int bench_plan(const PlanBenchOptions& o) {
  const auto rows = run_plan_bench(o);
  double median = 0, slowest = 0;  // CPU ms: the worst row's
  for (const auto& r : rows) {
    median = std::max(median, r.cpu_median_ms);
    slowest = std::max(slowest, r.cpu_max_ms);
  }
  const bool pass = median < kMedianTargetMs && slowest < kMaxTargetMs;
  const double load = load_average();
  if (o.json) {
    nlohmann::ordered_json j;
    j["target_median_ms"] = kMedianTargetMs;
    j["target_max_ms"] = kMaxTargetMs;
    j["load_average"] = load;
    j["rows"] = nlohmann::ordered_json::array();
    for (const auto& r : rows)
      j["rows"].push_back({{"mesh", r.mesh},
                           {"searched", r.searched},
                           {"refused", r.refused},
                           {"median_ms", r.median_ms},
                           {"p95_ms", r.p95_ms},
                           {"max_ms", r.max_ms},
                           {"cpu_median_ms", r.cpu_median_ms},
                           {"cpu_p95_ms", r.cpu_p95_ms},
                           {"cpu_max_ms", r.cpu_max_ms},
                           {"median_layouts", r.median_layouts},
                           {"max_layouts", r.max_layouts},
                           {"slowest", r.slowest}});
    j["cpu_median_ms"] = median;
    j["cpu_max_ms"] = slowest;
    j["pass"] = pass;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "# shardlab bench plan: the planner's search on " << o.cases << " random contractions per mesh"
            << "\n# dims of 256, float32, fewest bytes, seed " << o.seed
            << "; specs no plan can serve are refused and counted apart\n# ms per search: wall clock, and the thread's"
            << " CPU time (load average " << (load < 0 ? "unknown" : format_number(load, "%.2f")) << ")\n";
  Table t({"mesh", "searched", "refused", "wall_med", "wall_max", "cpu_med", "cpu_p95", "cpu_max", "layouts"});
  for (const auto& r : rows)
    t.add({r.mesh, std::to_string(r.searched), std::to_string(r.refused), format_number(r.median_ms, "%.2f"),
           format_number(r.max_ms, "%.2f"), format_number(r.cpu_median_ms, "%.2f"),
           format_number(r.cpu_p95_ms, "%.2f"), format_number(r.cpu_max_ms, "%.2f"),
           std::to_string(r.median_layouts)});
  std::cout << t.text();
  for (const auto& r : rows)
    if (!r.slowest.empty()) std::cout << "  slowest on " << r.mesh << ":\n    build/bin/shardlab einsum " << r.slowest << "\n";
  std::cout << "bench plan: " << (pass ? "PASS" : "FAIL") << ", CPU median " << format_number(median, "%.1f")
            << " ms (target < 15), slowest " << format_number(slowest, "%.1f") << " ms (target < 50)\n";
  return 0;
}

}  // namespace shardlab
