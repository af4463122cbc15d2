// harness/check/report.cpp: summarize(), largest_device_total(), Report verdicts, the table, the verdict
// line and the JSON report, over ledger rows made by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/check/report.hpp"
#include "harness/check/verdict_details.hpp"

using namespace shardlab;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

LedgerRow row(int device, int call, const std::string& op, const std::string& axes, const std::string& tensor,
              int group, std::size_t input, std::size_t sent, std::size_t msgs, double seconds) {
  LedgerRow r;
  r.device = device;
  r.call = call;
  r.op = op;
  r.axes = axes;
  r.tensor = tensor;
  r.algorithm = "ring";
  r.group_size = group;
  r.input_bytes = input;
  r.bytes_sent = sent;
  r.bytes_received = sent;
  r.messages = msgs;
  r.seconds = seconds;
  return r;
}

// 4 devices over Y (group of 4). Call 0: all_gather of a 32-byte block, 3 blocks sent = 96 B each.
// Call 1: all_reduce of 5 doubles (40 B), uneven chunks 2,1,1,1: devices send 7, 8, 8, 7 doubles.
std::vector<LedgerRow> hand_ledger() {
  std::vector<LedgerRow> l;
  const std::size_t ar[4] = {56, 64, 64, 56};
  for (int d = 0; d < 4; ++d) {
    l.push_back(row(d, 0, "all_gather", "Y", "A", 4, 32, 96, 3, 0.001 * (d + 1)));
    l.push_back(row(d, 1, "all_reduce", "Y", "C", 4, 40, ar[d], 6, 0.5 - 0.1 * d));
  }
  return l;
}

Verdict verdict(const std::string& name, bool pass, double err, double tol) {
  Verdict v;
  v.name = name;
  v.pass = pass;
  v.max_abs_error = err;
  v.tolerance = tol;
  v.power = (err + tol) / 1000;  // values of RMS 1000: within float32's floor
  if (!pass) v.detail = "first bad index [0]: got 1, want 2";
  return v;
}

}  // namespace

TEST_CASE("summarize: one summary per call, the largest per-device figures") {
  const auto s = summarize(hand_ledger());
  REQUIRE(s.size() == 2u);
  CHECK(s[0].call == 0);
  CHECK(s[0].op == "all_gather");
  CHECK(s[0].axes == "Y");
  CHECK(s[0].tensor == "A");
  CHECK(s[0].algorithm == "ring");
  CHECK(s[0].group_size == 4);
  CHECK(s[0].messages == 3u);
  CHECK(s[0].bytes_per_device == 96u);
  CHECK(s[0].predicted_bytes_per_device == 96u);  // 3 blocks of 32 B
  CHECK(s[0].seconds == 0.004);                    // the slowest device
  CHECK(s[0].matches());
  CHECK(s[1].op == "all_reduce");
  CHECK(s[1].tensor == "C");
  CHECK(s[1].messages == 6u);
  CHECK(s[1].bytes_per_device == 64u);            // devices 1 and 2 send 8 doubles
  CHECK(s[1].predicted_bytes_per_device == 64u);  // worked out by hand above
  CHECK(s[1].seconds == 0.5);
  CHECK(s[1].matches());
  CHECK_FALSE(s[1].modeled);
  CHECK(summarize({}).empty());
}

TEST_CASE("summarize: a measured byte count that differs from the prediction does not match") {
  auto l = hand_ledger();
  l[2].bytes_sent = 100;  // device 1, call 0
  const auto s = summarize(l);
  CHECK(s[0].bytes_per_device == 100u);
  CHECK_FALSE(s[0].matches());
  // a modeled row (native MPI) always matches: its bytes are the model's
  auto m = hand_ledger();
  m[2].bytes_sent = 100;
  m[2].modeled = true;
  CHECK(summarize(m)[0].modeled);
  CHECK(summarize(m)[0].matches());
}

TEST_CASE("largest_device_total: bytes sent by the busiest device over all calls") {
  auto l = hand_ledger();
  // totals: d0 = 96+56 = 152, d1 = 96+64 = 160, d2 = 160, d3 = 152
  CHECK(largest_device_total(l) == 160u);
  l.push_back(row(3, 2, "all_to_all", "Y", "D", 4, 64, 48, 3, 0));  // d3 = 200
  CHECK(largest_device_total(l) == 200u);
  CHECK(largest_device_total({}) == 0u);
}

TEST_CASE("Report::pass needs checks that pass and bytes that match the prediction") {
  Report r;
  r.case_name = "hand";
  r.add_ledger(hand_ledger());
  CHECK(r.collectives.size() == 2u);
  CHECK(r.bytes_per_device == 160u);
  CHECK_FALSE(r.pass());  // nothing checked yet
  r.checks.push_back(verdict("A", true, 0.0, 0.0));
  r.checks.push_back(verdict("C", true, 1e-12, 1e-10));
  CHECK(r.pass());
  CHECK(r.max_abs_error() == 1e-12);
  CHECK(r.tolerance() == 1e-10);

  Report wrong_bytes = r;
  auto l = hand_ledger();
  l[7].bytes_sent = 72;  // device 3 sends 9 doubles in the all_reduce, more than predicted
  wrong_bytes.add_ledger(l);
  CHECK_FALSE(wrong_bytes.pass());

  Report failed = r;
  failed.checks.push_back(verdict("D", false, 3.0, 0.0));
  CHECK_FALSE(failed.pass());
  CHECK(failed.max_abs_error() == 3.0);
}

TEST_CASE("verdict_line") {
  Report r;
  r.case_name = "ag";
  r.add_ledger(hand_ledger());
  r.checks.push_back(verdict("A", true, 0.0, 0.0));
  CHECK(verdict_line(r) == "PASS ag: max_abs_err=0 (exact, no tolerance)");
  r.checks.push_back(verdict("C", true, 0.25, 0.5));
  CHECK(verdict_line(r) == "PASS ag: max_abs_err=0.25 (tol 0.5); weakest catches 0.00075 x RMS");
  auto l = hand_ledger();
  l[0].bytes_sent = 100;
  r.add_ledger(l);
  // Too wide with the power beside it: the failure's name, cut at 100 columns, its detail above.
  CHECK(verdict_line(r) == "FAIL ag: max_abs_err=0.25 (tol 0.5); weakest catches 0.00075 x RMS; 1 failed: all_gather of A "
                          "mov...");
  CHECK(verdict_details(r) == "failed:\n  all_gather of A moved 100 bytes/device, predicted 96\n");
  Report none;
  none.case_name = "empty";
  CHECK(verdict_line(none) == "FAIL empty: max_abs_err=0 (exact, no tolerance); nothing was checked");
  Report bad;
  bad.case_name = "x";
  bad.checks.push_back(verdict("C", false, 1.0, 0.0));
  CHECK(verdict_line(bad) == "FAIL x: max_abs_err=1 (exact, no tolerance); C: first bad index [0]: got 1, want 2");
  // Several checks erred: the largest error is named, with its own check's tolerance (once
  // lesson 10's line showed a finite-difference error beside another check's tolerance).
  Report several;
  several.case_name = "fd";
  several.checks.push_back(verdict("y vs unsharded", true, 1e-9, 1e-3));
  several.checks.push_back(verdict("dW_in vs central differences", true, 3e-7, 1e-5));
  CHECK(verdict_line(several) == "PASS fd: max_abs_err=3e-07 (tol 1e-05) in dW_in; weakest catches 1e-06 x RMS");
  // Values beyond the type's range: their own verdict, not an error of 0 against a tolerance of inf.
  Report over;
  over.case_name = "big";
  over.dtype = DType::float64;
  const Tensor inf_t = Tensor({1.0, std::numeric_limits<double>::infinity()});
  over.checks.push_back(compare("t against the unsharded program", inf_t, inf_t, Tensor({0.0, INFINITY})));
  CHECK_FALSE(over.pass());
  CHECK(verdict_line(over) == "FAIL big: overflow in t: the reference holds inf at [1] (run inf)");
}

TEST_CASE("collectives_table marks matches, mismatches and modeled rows") {
  auto l = hand_ledger();
  std::string t = collectives_table(summarize(l));
  CHECK(has(t, "collective"));
  CHECK(has(t, "bytes/device"));
  CHECK(has(t, "predicted"));
  CHECK(has(t, "all_gather"));
  CHECK(has(t, "yes"));
  CHECK_FALSE(has(t, "NO"));
  l[0].bytes_sent = 100;
  CHECK(has(collectives_table(summarize(l)), "NO"));
  l[0].modeled = true;
  const std::string m = collectives_table(summarize(l));
  CHECK(has(m, "100*"));
  CHECK(has(m, "modeled"));
  CHECK(has(m, "* modeled: MPICH's own collective"));
}

TEST_CASE("collectives_table says what msgs and bytes/device count, within 100 columns") {
  // Issue 18: the msgs column was never explained. The hand ledger's counts are the ring's: 3 = n-1
  // messages for the all_gather, 6 = 2(n-1) for the all_reduce, in a group of n = 4.
  const std::string t = collectives_table(summarize(hand_ledger()));
  CHECK(has(t, "\n  msgs: messages one device sent; in a group of n: n-1, all_reduce 2(n-1)\n"));
  CHECK(has(t, "\n  bytes/device: bytes the busiest device sent, not the tensor's size\n"));
  CHECK_FALSE(has(t, "send 1"));  // no point-to-point rows
  CHECK_FALSE(has(t, "* modeled"));
  std::istringstream lines(t);
  for (std::string line; std::getline(lines, line);) CHECK(line.size() <= 100);
  auto l = hand_ledger();
  for (auto& r : l)
    if (r.op == "all_reduce") r.op = "all_reduce_max";
  CHECK(has(collectives_table(summarize(l)), "n-1, all_reduce and all_reduce_max 2(n-1)\n"));
  LedgerRow send = row(0, 2, "send", "", "act", 2, 64, 64, 1, 0.0);
  send.peer = 1;
  l.push_back(send);
  CHECK(has(collectives_table(summarize(l)), "2(n-1); send 1, recv 0\n"));
}

TEST_CASE("collectives_table with no collectives says so") {
  CHECK(collectives_table({}) == "  no collectives: 0 bytes moved between devices\n");
}

TEST_CASE("report_json has the documented fields") {
  Report r;
  r.case_name = "megatron_mlp";
  r.backend = "sim";
  r.mesh = Mesh::parse("X=2,Y=4");
  r.checks.push_back(verdict("C", true, 0.0, 0.0));
  r.add_ledger(hand_ledger());
  r.numbers["flops"] = 1024;
  r.strings["note"] = "hand";
  const auto j = nlohmann::json::parse(report_json(r));
  CHECK(j.at("case") == "megatron_mlp");
  CHECK(j.at("backend") == "sim");
  REQUIRE(j.at("mesh").is_object());
  CHECK(j.at("mesh").size() == 2u);
  CHECK(j.at("mesh").at("X") == 2);
  CHECK(j.at("mesh").at("Y") == 4);
  CHECK(j.at("pass") == true);
  CHECK(j.at("max_abs_error") == 0.0);
  CHECK(j.at("tolerance") == 0.0);
  CHECK(j.at("bytes_per_device") == 160);
  CHECK(j.at("flops") == 1024.0);
  CHECK(j.at("note") == "hand");
  REQUIRE(j.at("collectives").is_array());
  REQUIRE(j.at("collectives").size() == 2u);
  const auto& c0 = j.at("collectives")[0];
  CHECK(c0.at("op") == "all_gather");
  CHECK(c0.at("axes") == "Y");
  CHECK(c0.at("tensor") == "A");
  CHECK(c0.at("bytes_per_device") == 96);
  CHECK(c0.at("predicted_bytes_per_device") == 96);
  const auto& c1 = j.at("collectives")[1];
  CHECK(c1.at("op") == "all_reduce");
  CHECK(c1.at("tensor") == "C");
  CHECK(c1.at("bytes_per_device") == 64);
  CHECK(c1.at("predicted_bytes_per_device") == 64);
  // the mesh object keeps axis order; the top-level keys start as documented
  const std::string text = report_json(r);
  CHECK(text.find("\"X\"") < text.find("\"Y\""));
  CHECK(text.find("\"case\"") < text.find("\"backend\""));

  r.checks.push_back(verdict("D", false, 2.5, 0.0));
  const auto f = nlohmann::json::parse(report_json(r));
  CHECK(f.at("pass") == false);
  CHECK(f.at("max_abs_error") == 2.5);
}

TEST_CASE("summarize: a collective is one entry for its group; each send or receive is its device's own") {
  std::vector<shardlab::LedgerRow> rows;
  auto row = [](int device, int call, const std::string& op, int peer, std::size_t sent) {
    shardlab::LedgerRow r;
    r.device = device;
    r.call = call;
    r.op = op;
    r.peer = peer;
    r.group_size = 2;
    r.element_bytes = 4;
    r.input_bytes = op == "send" ? sent : 16;
    r.bytes_sent = sent;
    r.tensor = "t";
    return r;
  };
  rows.push_back(row(0, 0, "all_reduce", -1, 16));
  rows.push_back(row(1, 0, "all_reduce", -1, 16));
  rows.push_back(row(0, 1, "send", 1, 64));
  rows.push_back(row(1, 1, "recv", 0, 0));
  const auto s = shardlab::summarize(rows);
  REQUIRE(s.size() == 3);
  CHECK(s[0].op == "all_reduce");
  CHECK(s[0].peer == -1);
  CHECK(s[1].op == "send");
  CHECK(s[1].device == 0);
  CHECK(s[1].peer == 1);
  CHECK(s[1].bytes_per_device == 64);
  CHECK(s[1].predicted_bytes_per_device == 64);
  CHECK(s[2].op == "recv");
  CHECK(s[2].device == 1);
  CHECK(s[2].bytes_per_device == 0);
}

TEST_CASE("report JSON: each compared check carries its power, the dtype's floor and whether it is weak") {
  Report r;
  r.case_name = "c";
  r.dtype = DType::float32;
  const Tensor want = Tensor{{1.0, -1.0}};
  r.checks.push_back(compare("strong", want, want, 1e-4));
  r.checks.push_back(compare("weak", want, want, 0.5));
  const auto j = nlohmann::json::parse(report_json(r));
  REQUIRE(j["checks"].size() == 2);
  CHECK(j["checks"][0]["power"].get<double>() == doctest::Approx(1e-4));
  CHECK(j["checks"][0]["power_floor"].get<double>() == 1e-3);
  CHECK(j["checks"][0]["weak"] == false);
  CHECK(j["checks"][1]["power"].get<double>() == doctest::Approx(0.5));
  CHECK(j["checks"][1]["weak"] == true);
  CHECK(j["checks"][1]["tolerance_over_value_median"].get<double>() == doctest::Approx(0.5));
}

TEST_CASE("power line and verdict: the weakest check's power, and WEAK beside the verdict when above the floor") {
  Report r;
  r.case_name = "c";
  r.dtype = DType::float32;
  const Tensor want = Tensor{{1.0, -1.0}};
  r.checks.push_back(compare("y vs unsharded", want, want, 1e-4));
  CHECK(power_line(r) == "power: the weakest check (y) is sure to catch one wrong element off by 0.0001 x RMS; "
                         "floor for float32: 1e-03, every check within it");
  CHECK(verdict_line(r) == "PASS c: max_abs_err=0 (tol 0.0001); weakest catches 0.0001 x RMS");
  r.checks.push_back(compare("dx against the unsharded gradient", want, want, 0.5));
  CHECK(power_line(r) == "power: the weakest check (dx) is sure to catch one wrong element off by 0.5 x RMS; "
                         "floor for float32: 1e-03; 1 of 2 checks are above it (WEAK: a wrong answer that small "
                         "could pass them)");
  // One rule everywhere (docs/verification.md): a WEAK check fails the run, named in the verdict.
  CHECK_FALSE(r.pass());
  CHECK(verdict_line(r) == "FAIL c: max_abs_err=0 (tol 0.5); weakest catches 0.5 x RMS; 1/2 WEAK (WEAK fails the run)");
  r.weak_fails = false;  // a case file's allow_weak = "why"
  CHECK(r.pass());
  CHECK(verdict_line(r) == "PASS c: max_abs_err=0 (tol 0.5); weakest catches 0.5 x RMS; 1/2 WEAK");
  Report none;  // no comparison of values: no power to speak of
  none.case_name = "n";
  CHECK(power_line(none).empty());
}

TEST_CASE("power line: checks with no tolerance say exact, not 'off by 0 x RMS'") {
  Report r;
  r.case_name = "c";
  r.dtype = DType::float32;
  const Tensor want = Tensor{{1.0, -1.0}};
  r.checks.push_back(compare("y vs unsharded", want, want, 0.0));
  CHECK(power_line(r) == "power: every check is exact: one wrong element of any size fails it (floor for float32: 1e-03)");
  CHECK(power_line(r).find("0 x RMS") == std::string::npos);
  // Replayed (bfloat16): power 0 by the replay, so exact by replay, not "off by 0 x RMS" either.
  r.dtype = DType::bfloat16;
  r.checks = {compare("y vs unsharded", want, want, 0.5)};
  cover_by_replays(r.checks, {ReplayRecord{true, 2, 4, ""}});
  CHECK(power_line(r).rfind("power: every check is exact by replay: each run equals its replay bit for bit", 0) == 0);
  CHECK(power_line(r).find("0 x RMS") == std::string::npos);
  CHECK(verdict_line(r) == "PASS c: max_abs_err=0 (tol 0.5); exact by replay");
}

TEST_CASE("verdict line: the power fits beside the check the error is in, or alone within 100 columns") {
  Report r;
  r.case_name = "15_zero";
  r.dtype = DType::float32;
  const Tensor want = Tensor{{1.0, -1.0}}, got = Tensor{{1.0, -1.0 + 1e-8}};
  r.checks.push_back(compare("y", want, want, 1e-7));
  r.checks.push_back(compare("A, B, C after 3 Adam steps, ZeRO-1, with a long name", got, want, 2e-7));
  // Two checks erred? Only one did: no "in"; make the first err too.
  r.checks[0] = compare("y", got, want, 1e-7);
  const std::string line = verdict_line(r);
  CHECK(line.size() <= 100);
  CHECK(line.find("weakest catches 2.1e-07 x RMS") != std::string::npos);
  CHECK(line.find(" in A, B, C") == std::string::npos);  // left out to fit; the power stays
}

TEST_CASE("verdict line: when the error shown is a claimed check's, its claim is the power beside it") {
  Report r;
  r.case_name = "moe";
  r.add_ledger(hand_ledger());
  r.checks.push_back(verdict("out", true, 0.0, 0.0));  // exact
  Verdict gates = verdict("gates", true, 2e-8, 6e-8);
  gates.power = -1;  // no comparison of values: the check states what it catches instead
  gates.claim = "catches a gate off by more than u|g|";
  r.checks.push_back(gates);
  const std::string line = verdict_line(r);
  CHECK(line == "PASS moe: max_abs_err=2e-08 (tol 6e-08); catches a gate off by more than u|g|");
  CHECK(line.find("exact") == std::string::npos);  // the error beside it is not exact
}
