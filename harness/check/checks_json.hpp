// Verdicts as JSON, the one form `--json` reports use (report_json) and `bench ffn` reuses: name,
// pass, max_abs_error, tolerance, detail, worst_ratio (a tolerance per element) and, for a
// comparison of values, power (null: infinite), power_floor, weak and tolerance/value figures.
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.hpp"
#include "harness/check/verify.hpp"

namespace shardlab {

nlohmann::ordered_json checks_json(const std::vector<Verdict>& checks, DType t);

}  // namespace shardlab
