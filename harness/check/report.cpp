#include "harness/check/report.hpp"
#include "harness/check/checks_json.hpp"
#include "harness/check/verdict_details.hpp"

#include "core/text.hpp"
#include "core/wrap.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>

#include "collectives/predict.hpp"
#include "core/table.hpp"

namespace shardlab {

std::vector<CollectiveSummary> summarize(const std::vector<LedgerRow>& ledger) {
  // A collective's rows share their call number on every device of the group; a send or receive
  // is one device's own (the devices of a pipeline make different calls), so it stays apart.
  std::map<std::pair<int, int>, CollectiveSummary> by_call;
  for (const auto& r : ledger) {
    const bool p2p = r.peer >= 0;
    auto [it, fresh] = by_call.try_emplace({r.call, p2p ? r.device : -1});
    CollectiveSummary& s = it->second;
    if (fresh) {
      s.call = r.call;
      if (p2p) s.device = r.device, s.peer = r.peer;
      s.op = r.op;
      s.axes = r.axes;
      s.tensor = r.tensor;
      s.algorithm = r.algorithm;
      s.group_size = r.group_size;
    }
    s.messages = std::max(s.messages, r.messages);
    s.bytes_per_device = std::max(s.bytes_per_device, r.bytes_sent);
    s.predicted_bytes_per_device =
        std::max(s.predicted_bytes_per_device, r.part_bytes.empty()
                                                   ? predicted_bytes_sent(r.op, r.group_size, r.input_bytes, r.element_bytes)
                                                   : predicted_bytes_sent_v(r.op, r.part_bytes, r.member));
    s.seconds = std::max(s.seconds, r.seconds);
    s.modeled = s.modeled || r.modeled;
  }
  std::vector<CollectiveSummary> out;
  for (auto& kv : by_call) out.push_back(kv.second);
  return out;
}

std::size_t largest_device_total(const std::vector<LedgerRow>& ledger) {
  std::map<int, std::size_t> total;
  for (const auto& r : ledger) total[r.device] += r.bytes_sent;
  std::size_t most = 0;
  for (const auto& kv : total) most = std::max(most, kv.second);
  return most;
}

void Report::add_ledger(const std::vector<LedgerRow>& ledger) {
  collectives = summarize(ledger);
  bytes_per_device = largest_device_total(ledger);
}

bool Report::pass() const {
  for (const auto& c : checks)
    if (!c.pass) return false;
  for (const auto& c : collectives)
    if (!c.matches()) return false;
  if (weak_fails && power_summary(*this).weak > 0) return false;
  return !checks.empty();
}

double Report::max_abs_error() const {
  double m = 0;
  for (const auto& c : checks) m = std::max(m, c.max_abs_error);
  return m;
}

double Report::tolerance() const {
  double t = 0;
  for (const auto& c : checks) t = std::max(t, c.tolerance);
  return t;
}

std::string measured_cell(const CollectiveSummary& r) {
  return std::to_string(r.bytes_per_device) + (r.modeled ? "*" : "");
}

std::string match_cell(const CollectiveSummary& r) { return r.matches() ? (r.modeled ? "modeled" : "yes") : "NO"; }

std::string collectives_table(const std::vector<CollectiveSummary>& rows) {
  if (rows.empty()) return "  no collectives: 0 bytes moved between devices\n";
  Table t({"#", "collective", "over", "tensor", "group", "algorithm", "msgs", "bytes/device", "predicted", "match"});
  for (const auto& r : rows) {
    t.add({std::to_string(r.call), r.op, r.axes.empty() ? "-" : r.axes, r.tensor, std::to_string(r.group_size),
           r.algorithm, std::to_string(r.messages), measured_cell(r), std::to_string(r.predicted_bytes_per_device),
           match_cell(r)});
  }
  return t.text() + collectives_notes(rows);
}

std::string collectives_notes(const std::vector<CollectiveSummary>& rows) {
  // What the two count columns mean, with the ledger's counts (collectives/predict.cpp): each ring
  // or pairwise step sends one message, all_reduce is a reduce_scatter then an all_gather.
  bool p2p = false, modeled = false, max = false, permute = false;
  for (const auto& r : rows)
    p2p |= r.peer >= 0, modeled |= r.modeled, max |= r.op == "all_reduce_max", permute |= r.op == "collective_permute";
  std::string out = "  msgs: messages one device sent; in a group of n: n-1, all_reduce";
  out += max ? " and all_reduce_max 2(n-1)" : " 2(n-1)";
  out += permute ? ", collective_permute 1" : "";
  out += p2p ? "; send 1, recv 0\n" : "\n";
  out += "  bytes/device: bytes the busiest device sent, not the tensor's size\n";
  if (modeled) out += "  * modeled: MPICH's own collective; bytes come from the cost model, not the ledger\n";
  return out;
}

namespace {
// A check's subject, for a line that names it: "column: dW_out vs unsharded analytic" -> "column: dW_out".
std::string check_subject(std::string name) {
  for (const char* tail : {" vs ", " against ", " (", " = "}) name = name.substr(0, name.find(tail));
  return name;
}
}  // namespace

PowerSummary power_summary(const Report& report) { return power_summary(report.checks, report.dtype); }

PowerSummary power_summary(const std::vector<Verdict>& checks, DType t) {
  PowerSummary ps;
  ps.floor = power_floor(t);
  // The weakest: the largest power over its own floor (a NaN power is weak and weakest).
  auto over = [t](const Verdict& c) { return c.power / floor_for(c, t); };
  for (const auto& c : checks) {
    if (c.power < 0) continue;
    ++ps.compared;
    ps.weak += is_weak(c, t);
    if (!ps.weakest || !(over(c) <= over(*ps.weakest))) ps.weakest = &c;
  }
  return ps;
}

std::string power_line(const Report& report) {
  const PowerSummary ps = power_summary(report);
  if (!ps.weakest) return "";
  bool replays = false;
  for (const auto& c : report.checks) replays = replays || c.replayed;
  const std::string floor = "(floor for " + dtype_name(report.dtype) + ": " +
                            format_number(power_floor(report.dtype), "%.0e") + ")";
  if (ps.weakest->power == 0 && ps.weak == 0 && !replays)
    return "power: every check is exact: one wrong element of any size fails it " + floor;
  if (ps.weakest->power == 0 && ps.weak == 0)  // never "off by 0 x RMS": replayed checks are exact
    return "power: every check is exact by replay: each run equals its replay bit for bit (collectives "
           "computed from their definitions, summed in the ring's order), so one wrong element of any "
           "size fails it, and the unsharded reference bounds only " + dtype_name(report.dtype) + " rounding " + floor;
  std::string out = "power: the weakest check (" + check_subject(ps.weakest->name) + ") is sure to catch one wrong element off by " +
                    format_number(ps.weakest->power, "%.2g") + " x RMS; floor " +
                    (ps.weakest->floor >= 0 ? "for finite differences" : "for " + dtype_name(report.dtype)) + ": " +
                    format_number(floor_for(*ps.weakest, report.dtype), "%.0e");
  int replayed = 0;
  for (const auto& c : report.checks) replayed += c.replayed;
  if (ps.weak == 0 && replayed > 0)
    return out + ", every check within it: each run equals its replay bit for bit (collectives computed from "
                 "their definitions, summed in the ring's order), and the unsharded reference bounds only " +
           dtype_name(report.dtype) + " rounding";
  if (ps.weak == 0) return out + ", every check within it";
  return out + "; " + std::to_string(ps.weak) + " of " + std::to_string(ps.compared) +
         " checks are above it (WEAK: a wrong answer that small could pass them)";
}

std::string checks_power_phrase(const std::vector<Verdict>& checks, DType t) {
  // A failed check caught something: its power (its error counted in) is moot, so the weakest of
  // the comparisons of values that passed, when one did.
  std::vector<Verdict> passed;
  for (const auto& c : checks)
    if (c.pass && c.power >= 0) passed.push_back(c);
  const std::vector<Verdict>& judged = passed.empty() ? checks : passed;
  const PowerSummary ps = power_summary(judged, t);
  if (!ps.weakest) {  // no comparison of values: a claim, a tolerance with no power, or exact
    for (const auto& c : judged)
      if (!c.claim.empty() || c.tolerance > 0) return power_phrase(c);
    return "exact, no tolerance";
  }
  if (ps.weakest->power == 0) return ps.weakest->replayed ? "exact by replay" : "exact, no tolerance";
  return "weakest " + power_phrase(*ps.weakest);
}

std::string verdict_line(const Report& report) {
  // Values beyond the element type's range: their own verdict, not an error against a tolerance.
  for (const auto& c : report.checks)
    if (c.overflow)  // "the reference holds inf at [0] (run inf); the values left ..."
      return "FAIL " + report.case_name + ": overflow in " + check_subject(c.name) + ": " + c.detail.substr(0, c.detail.find("; "));
  std::ostringstream out;
  const bool pass = report.pass();
  // The largest error, with the tolerance of the check it comes from and, when several checks
  // erred, that check's name: a finite-difference check's error is not the sharding's.
  const Verdict* worst = nullptr;
  int erred = 0;
  for (const auto& c : report.checks) {
    erred += c.max_abs_error > 0;
    if (!worst || c.max_abs_error > worst->max_abs_error) worst = &c;
  }
  out << (pass ? "PASS " : "FAIL ") << report.case_name << ": max_abs_err=" << format_number(report.max_abs_error(), "%.3g");
  // Every verdict line states its power: an exact run says so in place of a tolerance; else the
  // weakest check's, after the check the error is in when both fit.
  // The error shown is the worst check's: when that check states a claim of its own (the MoE
  // gates' u|g|), the claim is the power beside it, not the exactness of the others.
  const bool claimed = worst && worst->max_abs_error > 0 && !worst->claim.empty();
  const std::string power = claimed ? power_phrase(*worst) : checks_power_phrase(report.checks, report.dtype);
  const bool exact = report.tolerance() == 0;
  if (exact) out << " (exact, no tolerance)";
  else if (worst && worst->max_abs_error > 0) out << " (tol " << format_number(worst->tolerance, "%.3g") << ")";
  else out << " (tol " << format_number(report.tolerance(), "%.3g") << ")";
  const std::string in = erred > 1 ? " in " + check_subject(worst->name) : "";
  if (!exact && out.str().size() + in.size() + power.size() + 2 > kVerdictWidth) out << "; " << power;
  else out << in << (exact ? "" : "; " + power);
  const PowerSummary ps = power_summary(report);
  if (ps.weak > 0) out << "; " << ps.weak << "/" << ps.compared << " WEAK";  // the power line says more
  if (ps.weak > 0 && report.weak_fails) out << " (WEAK fails the run)";  // the power line says why
  const std::vector<std::string> failures = verdict_failures(report);
  std::string all;
  for (const auto& f : failures) all += "; " + f;
  if (report.checks.empty()) all += "; nothing was checked";
  const std::string head = out.str();
  if (head.size() + all.size() <= kVerdictWidth) return head + all;
  // Too wide for one line: the count and the failures' names, their details above (verdict_details).
  std::string names;
  for (const auto& f : failures) names += (names.empty() ? "" : ", ") + f.substr(0, f.find(": "));
  std::string line = head + "; " + std::to_string(failures.size()) + " failed: " + names;
  if (line.size() > kVerdictWidth) line = line.substr(0, kVerdictWidth - 3) + "...";
  return line;
}

std::vector<std::string> verdict_failures(const Report& report) {
  std::vector<std::string> out;
  for (const auto& c : report.checks)
    if (!c.pass) out.push_back(c.name + ": " + (c.detail.empty() ? "over tolerance" : c.detail));
  for (const auto& c : report.collectives)
    if (!c.matches())
      out.push_back(c.op + " of " + c.tensor + " moved " + std::to_string(c.bytes_per_device) +
                    " bytes/device, predicted " + std::to_string(c.predicted_bytes_per_device));
  return out;
}

std::string verdict_details(const Report& report) {
  const std::string full = verdict_line(report);
  const std::vector<std::string> failures = verdict_failures(report);
  std::string all;
  for (const auto& f : failures) all += "; " + f;
  if (failures.empty() || (full.size() >= all.size() && full.compare(full.size() - all.size(), all.size(), all) == 0))
    return "";  // the verdict line already says everything
  std::string text = "failed:\n";
  for (const auto& f : failures) text += "  " + f + "\n";
  return wrap_lines(text, kVerdictWidth);
}

namespace {
// Counts and byte totals kept as doubles print as integers ("forward_collectives": 4, not 4.0).
nlohmann::ordered_json number_json(double v) {
  if (v == std::floor(v) && std::fabs(v) < 9.0e15) return static_cast<long long>(v);
  return v;
}
}  // namespace

nlohmann::ordered_json checks_json(const std::vector<Verdict>& checks, DType t) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& c : checks) {
    nlohmann::ordered_json one = {{"name", c.name}, {"pass", c.pass}, {"max_abs_error", c.max_abs_error},
                                  {"tolerance", c.tolerance}, {"detail", c.detail}};
    if (c.worst_ratio >= 0) one["worst_ratio"] = c.worst_ratio;  // a tolerance per element
    if (c.power >= 0) {  // a comparison of values: how small a wrong element it must catch
      one["power"] = std::isfinite(c.power) ? number_json(c.power) : nlohmann::ordered_json(nullptr);  // null: infinite
      one["power_floor"] = floor_for(c, t);
      one["weak"] = is_weak(c, t);
      one["tolerance_over_value_median"] = number_json(c.tol_over_value_median);
      one["tolerance_over_value_max"] = number_json(c.tol_over_value_max);
      if (c.replayed) {  // power 0 by the replay; the unsharded reference's bound, for the record
        one["replayed"] = true;
        one["rounding_power"] =
            std::isfinite(c.rounding_power) ? number_json(c.rounding_power) : nlohmann::ordered_json(nullptr);
      }
    }
    out.push_back(one);
  }
  return out;
}

std::string report_json(const Report& report) {
  nlohmann::ordered_json j;
  j["case"] = report.case_name;
  j["backend"] = report.backend;
  j["dtype"] = dtype_name(report.dtype);
  j["element_bytes"] = element_bytes(report.dtype);
  nlohmann::ordered_json mesh = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < report.mesh.names().size(); ++i) mesh[report.mesh.names()[i]] = report.mesh.sizes()[i];
  j["mesh"] = mesh;
  // One collective: what was planned, and (after a run) what the ledger measured.
  auto collective = [](const CollectiveSummary& c, bool measured) {
    nlohmann::ordered_json r = {{"op", c.op}, {"axes", c.axes}, {"tensor", c.tensor}};
    if (!c.run.empty()) r["run"] = c.run;
    if (c.peer >= 0) {  // send / recv: one device's, to or from its peer
      r["device"] = c.device;
      r["peer"] = c.peer;
    }
    if (measured) r["algorithm"] = c.algorithm;
    r["group_size"] = c.group_size;
    if (measured) {
      r["messages"] = c.messages;
      r["bytes_per_device"] = c.bytes_per_device;
    }
    r["predicted_bytes_per_device"] = c.predicted_bytes_per_device;
    if (measured) {
      r["seconds"] = c.seconds;
      r["modeled"] = c.modeled;
    }
    return r;
  };
  if (!report.plan_only) {
    j["pass"] = report.pass();
    j["max_abs_error"] = report.max_abs_error();
    j["tolerance"] = report.tolerance();
    // The weakest compared check's power (verify.hpp); absent when no check compared values, null
    // when infinite (JSON has no infinity): a check that is sure to catch nothing.
    const PowerSummary ps = power_summary(report);
    if (ps.weakest) j["power"] = std::isfinite(ps.weakest->power) ? number_json(ps.weakest->power) : nlohmann::ordered_json(nullptr);
    j["checks"] = checks_json(report.checks, report.dtype);
  } else {
    j["plan_only"] = true;
  }
  j["collectives"] = nlohmann::ordered_json::array();
  for (const auto& c : report.plan_only ? report.planned : report.collectives)
    j["collectives"].push_back(collective(c, !report.plan_only));
  if (!report.plan_only) j["bytes_per_device"] = report.bytes_per_device;
  for (const auto& kv : report.numbers) j[kv.first] = number_json(kv.second);
  for (const auto& kv : report.strings) j[kv.first] = kv.second;
  for (const auto& kv : report.json) j[kv.first] = nlohmann::ordered_json::parse(kv.second);
  return j.dump(2);
}

}  // namespace shardlab
