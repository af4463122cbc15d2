#include "harness/jobs/job_sweep.hpp"

#include "core/text.hpp"
#include "harness/jobs/job_search.hpp"

namespace shardlab {

DatTable plan_model_sweep(const std::string& model, const std::string& cluster, int devices) {
  const ModelSpec m = load_model(model);
  const ClusterSpec c = load_cluster(cluster);
  JobSearchOptions o;
  o.devices = devices;
  const JobSearchResult r = search_layouts(m, c, o);
  DatTable t;
  t.name = "plan_model";
  t.notes = {"plan-model's search: " + m.name + " on " + std::to_string(devices) + " devices of " + c.name +
                 " (" + format_number(c.memory_bytes / 1e9, "%.0f") + " GB each)",
             "every layout searched: memory per device (GB, 1e9 bytes) and modeled step time (s)",
             "block 0: fits in memory; block 1: does not; block 2: the planner's choice"};
  t.columns = {"memory_GB", "step_s", "dp", "tp", "cp", "pp", "vp", "zero", "micro_batch", "recompute"};
  auto row = [](const JobCost& j) {
    const Layout& l = j.layout;
    return std::vector<std::string>{format_number(j.memory.total() / 1e9, "%.2f"), format_number(j.time.step(), "%.3f"),
                                    std::to_string(l.dp), std::to_string(l.tp) + (l.sp ? "+SP" : ""), std::to_string(l.cp),
                                    std::to_string(l.pp), std::to_string(l.vp), std::to_string(l.zero),
                                    std::to_string(l.micro_batch), recompute_name(l.recompute)};
  };
  DatBlock fit{"fits", {}}, big{"does not fit", {}}, best{"chosen", {}};
  for (const auto& j : r.fitting) fit.rows.push_back(row(j));
  for (const auto& j : r.too_big) big.rows.push_back(row(j));
  if (!r.fitting.empty()) best.rows.push_back(row(r.fitting[0]));
  t.blocks = {fit, big, best};
  return t;
}

}  // namespace shardlab
