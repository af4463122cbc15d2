#include "harness/bench/calibrate.hpp"

#include <algorithm>
#include <cmath>

#include "core/text.hpp"
#include "core/table.hpp"

namespace shardlab {

double ModelRow::error() const { return measured > 0 ? std::fabs(model - measured) / measured : INFINITY; }

std::vector<ModelRow> model_rows(const BenchResult& r, const Hardware& hw) {
  std::vector<ModelRow> out;
  for (const auto& row : r.rows) {
    if (row.ours_seconds <= 0 || r.group_size < 2) continue;  // one device moves nothing: no model
    const Algorithm algo = row.op == "all_to_all" ? Algorithm::pairwise : Algorithm::ring;
    out.push_back({row.op, row.bytes, row.ours_seconds, collective_seconds(row.op, algo, r.group_size, double(row.bytes), hw)});
  }
  return out;
}

ModelSummary model_summary(const std::vector<ModelRow>& rows, std::size_t from_bytes) {
  ModelSummary s;
  std::vector<double> errors;
  for (const auto& row : rows) {
    if (row.bytes < from_bytes) continue;
    errors.push_back(row.error());
    if (errors.size() == 1 || row.error() > s.worst_error) {
      s.worst_error = row.error();
      s.worst = row.op + " " + size_text(row.bytes);
    }
  }
  s.rows = errors.size();
  if (errors.empty()) return s;
  std::sort(errors.begin(), errors.end());
  const std::size_t n = errors.size();
  s.median_error = n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
  return s;
}

std::string model_table(const BenchResult& r, const Hardware& hw, const std::string& machine_path) {
  std::string out = "\n# the cost model of " + machine_path + ":\n#   launch " + format_number(hw.launch * 1e6, "%.3g") +
                    " us a call, alpha " + format_number(hw.alpha * 1e6, "%.3g") + " us, link " +
                    format_number(hw.bytes_per_s / 1e9, "%.4g") + " GB/s, reduction " +
                    format_number(hw.reduce_bytes_per_s / 1e9, "%.3g") + " GB/s; ring (pairwise all_to_all) on " +
                    std::to_string(r.group_size) + (r.group_size == 1 ? " device" : " devices") + "\n#   ours: the " +
                    (r.statistic == "min" ? "fastest" : "median") + " of " + std::to_string(r.iters) +
                    " timed calls a size, slowest device\n";
  if (r.group_size < 2) return out + "# a group of one device sends nothing: the model has nothing to predict\n";
  const std::vector<ModelRow> rows = model_rows(r, hw);
  Table t({"collective", "size", "ours us", "model us", "ours/model", "|error|"});
  std::string last;
  for (const auto& row : rows) {
    if (!last.empty() && row.op != last) t.add({});
    last = row.op;
    t.add({row.op, size_text(row.bytes), format_number(row.measured * 1e6, "%.1f"), format_number(row.model * 1e6, "%.1f"),
           format_number(row.measured / row.model, "%.2f"), format_number(100 * row.error(), "%.0f%%")});
  }
  out += t.text("");
  const std::size_t from = std::size_t(1) << 20;
  const ModelSummary s = model_summary(rows, from);
  if (s.rows == 0)
    out += "# model vs measured at >= 1M: no rows (give --max 1M or more)\n";
  else
    out += "# model vs measured at >= 1M: median |error| " + format_number(100 * s.median_error, "%.0f") + "%, worst " +
           format_number(100 * s.worst_error, "%.0f") + "% (" + s.worst + ") over " + std::to_string(s.rows) + (s.rows == 1 ? " row\n" : " rows\n");
  return out;
}

}  // namespace shardlab
