// harness/check/trace.cpp: the timeline --trace writes. Expected values come from the ledger the
// run returned (every row must appear once, on its own device) and from the Chrome Trace Event
// Format's rules (complete events on one track nest).
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "collectives/collectives.hpp"
#include "collectives/runtime.hpp"
#include "core/einsum.hpp"
#include "core/error.hpp"
#include "core/trace.hpp"
#include "harness/check/trace.hpp"
#include "run_binary.hpp"

using namespace shardlab;
using json = nlohmann::json;

namespace {

// An einsum, an all-gather over Y, an all-reduce over X and a softmax-free sum on a 2x2 mesh.
RunResult traced_run(Runtime& rt) {
  rt.record_trace();
  return rt.run(Mesh::parse("X=2,Y=2"), [](Device& dev) -> Outputs {
    Tensor a = xt::ones<double>(Shape{2, 3});
    Tensor b = xt::ones<double>(Shape{3, 2});
    Tensor c = matmul(a, b);
    Tensor g = all_gather(dev, c, {"Y"}, 1, "C");
    Tensor s = all_reduce(dev, g, {"X"}, "S");
    return {{"s", s}};
  });
}

// Every complete event of one track either holds the next or ends before it starts.
void check_nesting(const json& events) {
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> tracks;
  for (const auto& e : events)
    if (e["ph"] == "X") tracks[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back({e["ts"], e["ts"].get<double>() + e["dur"].get<double>()});
  for (auto& [key, spans] : tracks) {
    std::sort(spans.begin(), spans.end(), [](auto& x, auto& y) { return x.first < y.first || (x.first == y.first && x.second > y.second); });
    std::vector<double> open;  // ends of the enclosing events
    for (const auto& [start, end] : spans) {
      while (!open.empty() && open.back() <= start) open.pop_back();
      if (!open.empty()) CHECK_MESSAGE(end <= open.back() + 1e-6, "device " << key.first << " track " << key.second);
      open.push_back(end);
    }
  }
}

// Each ledger row as one communication event on its device: (pid, run, call) -> count.
void check_rows_once(const json& events, const std::vector<std::vector<LedgerRow>>& runs) {
  std::map<std::tuple<int, int, int>, std::pair<int, std::string>> seen;
  for (const auto& e : events)
    if (e["ph"] == "X" && e["cat"] == "communication") {
      CHECK(e["pid"].get<int>() == e["args"]["device"].get<int>() + 1);  // pid 0 is special to Perfetto
      auto& s = seen[{e["args"]["device"].get<int>(), e["args"]["run"].get<int>(), e["args"]["call"].get<int>()}];
      s.first += 1;
      s.second = e["name"];
    }
  std::size_t rows = 0;
  for (std::size_t k = 0; k < runs.size(); ++k)
    for (const auto& r : runs[k]) {
      ++rows;
      const auto it = seen.find({r.device, static_cast<int>(k), r.call});
      REQUIRE_MESSAGE(it != seen.end(), "device " << r.device << " call " << r.call);
      CHECK(it->second.first == 1);
      CHECK(it->second.second == trace_event_name(r));
    }
  CHECK(seen.size() == rows);  // and no event without its row
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_SUITE("trace") {

TEST_CASE("trace: spans are recorded only inside a traced device") {
  CHECK(trace_spans() == nullptr);
  Tensor a = xt::ones<double>(Shape{2, 2});
  matmul(a, a);  // outside any device: nothing to record into, nothing recorded
  Runtime rt(Backend::sim);
  const RunResult plain = rt.run(Mesh::parse("2"), [](Device& dev) -> Outputs {
    Tensor x = xt::ones<double>(Shape{2, 2});
    matmul(x, x);
    CHECK(dev.spans().empty());
    return {};
  });
  CHECK(plain.spans.empty());
  CHECK(rt.trace().empty());
}

TEST_CASE("trace: every ledger row once on its device, compute spans, tracks that nest") {
  Runtime rt(Backend::sim);
  const RunResult r = traced_run(rt);
  REQUIRE(r.spans.size() == 4);
  for (const auto& spans : r.spans) {
    REQUIRE(spans.size() == 1);
    CHECK(spans[0].name == "einsum");
    CHECK(spans[0].detail == "ik,kj->ij [2, 3] x [3, 2]");
    CHECK(spans[0].dur_us >= 0);
  }
  REQUIRE(r.ledger.size() == 8);  // 2 collectives on each of 4 devices
  REQUIRE(rt.trace().size() == 1);

  const json j = json::parse(trace_json({{"small", rt.trace()}}));
  const json& events = j["traceEvents"];
  std::set<int> named;
  for (const auto& e : events)
    if (e["ph"] == "M" && e["name"] == "process_name") named.insert(e["pid"].get<int>());
  CHECK(named == std::set<int>{1, 2, 3, 4});  // device d is process d + 1
  check_rows_once(events, {r.ledger});
  check_nesting(events);
  // The bytes in args are the ledger's: an all-gather of 2x1... blocks over 2 devices.
  for (const auto& e : events)
    if (e["ph"] == "X" && e["name"] == "all_gather C over Y") {
      CHECK(e["tid"] == 2);
      CHECK(e["args"]["device"] == e["pid"].get<int>() - 1);
      CHECK(e["args"]["bytes_sent"] == 2 * 2 * 8 / 1);  // one block of c [2, 2] float64 to the neighbour
      CHECK(e["args"]["axes"] == "Y");
    }
  double min_ts = 1e300;
  for (const auto& e : events)
    if (e["ph"] == "X") min_ts = std::min(min_ts, e["ts"].get<double>());
  CHECK(min_ts == 0);  // times start at the first event
}

TEST_CASE("trace: a lesson's --trace file has a device track per device and every ledger row") {
  const std::string path = "/tmp/shardlab_test_trace_" + std::to_string(::getpid()) + ".json";
  const auto ran = testing::run_binary("08_gspmd_ffn --json --trace " + path);
  REQUIRE(ran.status == 0);
  const json report = json::parse(ran.out);
  const json j = json::parse(read_all(path));
  std::remove(path.c_str());
  std::set<int> named;
  std::map<std::string, int> comm_by_name;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") named.insert(e["pid"].get<int>());
    if (e["ph"] == "X" && e["cat"] == "communication") comm_by_name[e["name"]] += 1;
  }
  CHECK(named.size() == 8);
  check_nesting(j["traceEvents"]);
  // The report's collectives, each on every device of its group, once per device: the events of
  // one name add up to the group size times the groups (every device of the mesh).
  REQUIRE(report["collectives"].size() > 0);
  for (const auto& c : report["collectives"]) {
    const std::string name = c["op"].get<std::string>() + " " + c["tensor"].get<std::string>() + " over " + c["axes"].get<std::string>();
    CAPTURE(name);
    CHECK(comm_by_name[name] % 8 == 0);
    CHECK(comm_by_name[name] >= 8);
  }
}

TEST_CASE("trace: --plan-only runs no devices, so --trace with it is refused (exit 2, nothing written)") {
  const std::string path = "/tmp/shardlab_test_trace_plan_" + std::to_string(::getpid()) + ".json";
  for (const std::string& command : {"shardlab ffn --plan-only --trace " + path,
                                    "shardlab matmul --a-spec _,Y --b-spec Y,_ --plan-only --trace " + path,
                                    "shardlab run harness/cases/gspmd_ffn.toml --plan-only --trace " + path,
                                    "shardlab run harness/cases/esm2_layer.toml --trace " + path}) {
    CAPTURE(command);
    const auto r = testing::run_binary(command);
    CHECK(r.status == 2);
    CHECK(r.err.find("--trace records the devices of a run") != std::string::npos);
    CHECK_FALSE(std::ifstream(path).good());
  }
}

TEST_CASE("trace: bench collectives --trace holds every timed call's ledger rows") {
  const std::string path = "/tmp/shardlab_test_trace_bench_" + std::to_string(::getpid()) + ".json";
  const auto r = testing::run_binary("shardlab bench collectives --ops all_reduce --min 1K --max 1K --iters 2 --warmup 0 --trace " + path);
  REQUIRE(r.status == 0);
  const json j = json::parse(read_all(path));
  std::remove(path.c_str());
  int reduces = 0;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "communication" && e["args"]["op"] == "all_reduce") ++reduces;
  CHECK(reduces >= 2 * 2);  // at least the 2 timed calls on each of the 2 devices
}

TEST_CASE("trace: a path that cannot be written fails before the run, and /dev/full stays a device") {
  auto bad = testing::run_binary("08_gspmd_ffn --quiet --trace /nonexistent_dir/t.json");
  CHECK(bad.status == 2);
  CHECK(bad.out.empty());
  CHECK(bad.err.find("/nonexistent_dir/t.json") != std::string::npos);
  auto full = testing::run_binary("08_gspmd_ffn --quiet --trace /dev/full");
  CHECK(full.status == 2);
  struct stat st {};
  REQUIRE(::stat("/dev/full", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
}

}  // TEST_SUITE
