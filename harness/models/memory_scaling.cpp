#include "harness/models/memory_scaling.hpp"

#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "core/table.hpp"
#include "harness/models/sweep.hpp"

namespace shardlab {

std::vector<MemoryPoint> memory_scaling(const FfnConfig& config, int max_devices, std::size_t run_limit) {
  const FfnStrategy& s = ffn_strategy(config.strategy);
  std::vector<MemoryPoint> out;
  for (int n : sweep_device_counts(max_devices)) {
    const std::string mesh_text = s.mesh_axes == 2 ? two_axis_mesh(n) : "D=" + std::to_string(n);
    const Mesh mesh = Mesh::parse(mesh_text);
    FfnPlan plan;
    try {
      plan = plan_ffn(mesh, config);
    } catch (const Error& e) {
      const ErrorKind k = e.kind();  // the dims do not split over this mesh, or it has too few axes
      if (k == ErrorKind::not_divisible || k == ErrorKind::parse || k == ErrorKind::unsupported) continue;
      throw;
    }
    MemoryPoint p;
    p.devices = n;
    p.mesh = mesh_text;
    p.planned_held = p.held = plan.stored_bytes_per_device;
    p.planned_peak = p.peak = plan.peak_bytes_per_device;
    p.unsharded_held = plan.unsharded_stored_bytes;
    p.unsharded_peak = plan.unsharded_peak_bytes;
    if (plan.unsharded_peak_bytes <= run_limit) {
      Runtime runtime(Backend::sim, false, config.dtype);
      runtime.set_replay(false);  // memory is measured here, not values
      FfnConfig c = config;
      c.finite_differences = false;
      // Memory is what this measures: each stage is still checked, by sketch, but not against four
      // unsharded layers (the full check, ffn_check.hpp), which would dominate `make plots`' sweep,
      // above all under AddressSanitizer. bfloat16 has no sketch (plan_ffn refuses it): full there.
      c.verify = c.dtype == DType::bfloat16 ? "full" : "sketch";
      const FfnResult r = run_ffn(runtime, mesh, c);
      p.measured = true;
      p.held = r.stored_bytes_per_device;
      p.peak = r.peak_bytes_per_device;
      if (p.held != p.planned_held || p.peak != p.planned_peak)
        throw Error(ErrorKind::fault, "on " + mesh_text + " a device held " + std::to_string(p.held) + " B (peak " +
                                          std::to_string(p.peak) + "); the plan says " + std::to_string(p.planned_held) +
                                          " (peak " + std::to_string(p.planned_peak) + ")");
    }
    out.push_back(p);
  }
  return out;
}

std::string memory_scaling_table(const std::vector<MemoryPoint>& points, const std::string& indent) {
  Table t({"devices", "mesh", "held", "peak", "transient", "held x n", "peak x n", "how"});
  for (const MemoryPoint& p : points) {
    const double n = p.devices;
    t.add({std::to_string(p.devices), p.mesh, human_bytes(static_cast<double>(p.held)),
           human_bytes(static_cast<double>(p.peak)), human_bytes(static_cast<double>(p.transient())),
           format_number(n * static_cast<double>(p.held) / static_cast<double>(p.unsharded_held), "%.2f"),
           format_number(n * static_cast<double>(p.peak) / static_cast<double>(p.unsharded_peak), "%.2f"),
           p.measured ? "run" : "planned"});
  }
  return t.text(indent);
}

}  // namespace shardlab
