// What a FAIL verdict line names, and the lines above it when it cannot hold them all: the verdict
// line (report.hpp's verdict_line) stays within kVerdictWidth columns.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "harness/check/report.hpp"

namespace shardlab {

// A FAIL verdict line names each failing check and its detail ("; C: first bad index [0]: got 1,
// want 2") when they fit in kVerdictWidth columns; else their count and names ("; 4 failed: O,
// dQ, dK, dV"), cut with "..." past the width, and verdict_details has them whole.
constexpr std::size_t kVerdictWidth = 100;
// Each failing check ("name: detail") and mismatched collective, in the verdict's order.
std::vector<std::string> verdict_failures(const Report& report);
// "failed:" and one line per failure, wrapped to kVerdictWidth, for above a verdict line too
// narrow to hold them; "" when the verdict line holds them all.
std::string verdict_details(const Report& report);

}  // namespace shardlab
