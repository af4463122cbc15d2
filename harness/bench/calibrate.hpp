// shardlab bench collectives --machine FILE: the cost model checked against what it predicts.
// Beside the measured table, each collective and size gets the alpha-beta-gamma time of the
// machine.dat that `shardlab sweep --what machine` fitted (launch + alpha-beta-gamma; ring,
// pairwise all_to_all, as ours runs them), the measured time of ours over it, and a summary over the sizes from 1 MiB up: the median
// and worst |model - measured| / measured. On several hosts (make cluster) this says whether the
// model, fitted once, predicts every collective and size it was not fitted to.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "harness/bench/bench.hpp"
#include "harness/cost/cost.hpp"

namespace shardlab {

struct ModelRow {
  std::string op;
  std::size_t bytes = 0;
  double measured = 0, model = 0;  // seconds per call: ours (median, slowest device), the model's
  double error() const;            // |model - measured| / measured
};
std::vector<ModelRow> model_rows(const BenchResult& r, const Hardware& hw);

struct ModelSummary {
  std::size_t rows = 0;  // rows at from_bytes or more
  double median_error = 0, worst_error = 0;
  std::string worst;  // "all_gather 4M"
};
ModelSummary model_summary(const std::vector<ModelRow>& rows, std::size_t from_bytes);

// The table and its summary line ("# model vs measured at >= 1 MiB: median |error| 4%, worst 12%
// (all_gather 4M)"), the machine file's figures in its header.
std::string model_table(const BenchResult& r, const Hardware& hw, const std::string& machine_path);

}  // namespace shardlab
