// Reports: the ledger summarised per collective call, compared with the cost model's prediction,
// plus the verdicts; printed as an aligned table or as one JSON object (--json).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "collectives/ledger.hpp"
#include "core/mesh.hpp"
#include "harness/check/verify.hpp"

namespace shardlab {

// One collective call, over all devices that made it.
struct CollectiveSummary {
  int call = 0;
  std::string op, axes, tensor, algorithm;
  int group_size = 1;
  int device = -1, peer = -1;                  // send / recv: the device and its peer; -1 for collectives
  std::size_t messages = 0;                    // most payload messages sent by one device
  std::size_t bytes_per_device = 0;            // most bytes sent by one device (measured)
  std::size_t predicted_bytes_per_device = 0;  // cost model
  double seconds = 0;                          // slowest device
  bool modeled = false;
  std::string run;  // which of a lesson's runs made it ("megatron"), when it runs several; "" otherwise
  bool matches() const { return modeled || bytes_per_device == predicted_bytes_per_device; }
};

std::vector<CollectiveSummary> summarize(const std::vector<LedgerRow>& ledger);
std::size_t largest_device_total(const std::vector<LedgerRow>& ledger);  // bytes sent by the busiest device

struct Report {
  std::string case_name;
  std::string backend;
  DType dtype = DType::float32;  // the element type stored and moved
  Mesh mesh;
  std::vector<Verdict> checks;
  std::vector<CollectiveSummary> collectives;
  std::size_t bytes_per_device = 0;
  std::map<std::string, double> numbers;       // extra numeric fields for --json
  std::map<std::string, std::string> strings;  // extra text fields for --json
  std::map<std::string, std::string> json;     // extra fields already written as JSON text
  // --plan-only: nothing ran, so the JSON has "plan_only": true and no verdict fields; the
  // collectives are the planned ones (`predicted_bytes_per_device` only).
  bool plan_only = false;
  std::vector<CollectiveSummary> planned;

  // A check above its power floor (WEAK) fails the report: a wrong answer that small could pass it
  // (docs/verification.md). Only a case file's allow_weak = "why" turns this off.
  bool weak_fails = true;

  void add_ledger(const std::vector<LedgerRow>& ledger);  // fills collectives and bytes_per_device
  // Every check passes (and none is WEAK when weak_fails) and every measured byte count equals
  // its prediction.
  bool pass() const;
  double max_abs_error() const;
  double tolerance() const;
};

std::string collectives_table(const std::vector<CollectiveSummary>& rows);  // aligned text, then its notes
// The lines under a table of these rows saying what msgs and bytes/device count (and '*', when a
// row is modeled), for tables of collectives built elsewhere.
std::string collectives_notes(const std::vector<CollectiveSummary>& rows);
// A row's measured bytes ("96", "96*" when modeled) and its match cell ("yes", "NO", "modeled").
std::string measured_cell(const CollectiveSummary& r);
std::string match_cell(const CollectiveSummary& r);
// "PASS case: max_abs_err=0 (exact, no tolerance)", "PASS case: max_abs_err=6e-07 (tol 3e-06) in y;
// weakest catches 3.7e-06 x RMS": one line, with the power of the run's checks.
std::string verdict_line(const Report& report);
// Power over a report's comparisons (verify.hpp): how many, how many above the element type's
// floor (weak), and the weakest (null when no check compared values).
struct PowerSummary {
  int compared = 0, weak = 0;
  double floor = 0;
  const Verdict* weakest = nullptr;
};
PowerSummary power_summary(const std::vector<Verdict>& checks, DType t);
PowerSummary power_summary(const Report& report);  // over report.checks, in report.dtype
// "power: the weakest check (dx) is sure to catch one wrong element off by 1.7e+03 x RMS; ..."
// for the line before the verdict; empty when no check compared values.
std::string power_line(const Report& report);
// The power of a run's checks in one phrase, for a line that sums them up (power_phrase in
// verify.hpp): "weakest catches 3.7e-06 x RMS", "exact by replay" or "exact, no tolerance" when
// every comparison is exact. Over the comparisons that passed, when one did: a failed check's
// power (its error counted in) is moot.
std::string checks_power_phrase(const std::vector<Verdict>& checks, DType t);
std::string report_json(const Report& report);   // one JSON object (docs/schemas.md lists the fields)

}  // namespace shardlab
