#include "harness/check/trace.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <iostream>
#include <ostream>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/write_file.hpp"

namespace shardlab {

namespace {
using json = nlohmann::ordered_json;
constexpr int kComputeTrack = 1, kCommTrack = 2;
// Device d is process d + 1: Perfetto treats pid 0 as special (the idle/swapper process).
int pid(int device) { return device + 1; }

json metadata(const std::string& what, int pid, int tid, const json& args) {
  return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", args}};
}

double ns(double us) { return std::round(us * 1000) / 1000; }  // microseconds to the nanosecond

json complete(const std::string& name, const std::string& cat, double ts, double dur, int pid, int tid, json args) {
  return {{"name", name}, {"cat", cat}, {"ph", "X"}, {"ts", ns(ts)}, {"dur", ns(std::max(0.0, dur))},
          {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}
}  // namespace

std::string trace_event_name(const LedgerRow& row) {
  if (row.op == "send") return "send " + row.tensor + " to " + std::to_string(row.peer);
  if (row.op == "recv") return "recv " + row.tensor + " from " + std::to_string(row.peer);
  return row.op + " " + (row.tensor.empty() ? "-" : row.tensor) + " over " + (row.axes.empty() ? "-" : row.axes);
}

std::string trace_json(const std::vector<TraceSource>& sources) {
  // Times from the earliest event, so the timeline starts at 0.
  double t0 = std::numeric_limits<double>::infinity();
  std::set<int> devices;
  for (const auto& src : sources)
    for (const auto& run : src.runs) {
      for (const auto& r : run.ledger) t0 = std::min(t0, r.start_us), devices.insert(r.device);
      for (std::size_t d = 0; d < run.spans.size(); ++d) {
        devices.insert(static_cast<int>(d));
        for (const auto& s : run.spans[d]) t0 = std::min(t0, s.start_us);
      }
    }
  if (!std::isfinite(t0)) t0 = 0;

  json events = json::array();
  for (int d : devices) {
    events.push_back(metadata("process_name", pid(d), 0, {{"name", "device " + std::to_string(d)}}));
    events.push_back(metadata("process_sort_index", pid(d), 0, {{"sort_index", d}}));
    events.push_back(metadata("thread_name", pid(d), kComputeTrack, {{"name", "compute"}}));
    events.push_back(metadata("thread_name", pid(d), kCommTrack, {{"name", "communication"}}));
  }
  int run_index = 0;
  for (const auto& src : sources)
    for (const auto& run : src.runs) {
      for (std::size_t d = 0; d < run.spans.size(); ++d)
        for (const auto& s : run.spans[d])
          events.push_back(complete(s.name, "compute", s.start_us - t0, s.dur_us, pid(static_cast<int>(d)), kComputeTrack,
                                    {{"device", d}, {"detail", s.detail}, {"case", src.label}, {"run", run_index}}));
      for (const auto& r : run.ledger)
        events.push_back(complete(trace_event_name(r), "communication", r.start_us - t0, r.seconds * 1e6, pid(r.device),
                                  kCommTrack,
                                  {{"device", r.device},
                                   {"case", src.label},
                                   {"run", run_index},
                                   {"call", r.call},
                                   {"op", r.op},
                                   {"tensor", r.tensor},
                                   {"axes", r.axes},
                                   {"algorithm", r.algorithm},
                                   {"group_size", r.group_size},
                                   {"peer", r.peer},
                                   {"element_bytes", r.element_bytes},
                                   {"input_bytes", r.input_bytes},
                                   {"output_bytes", r.output_bytes},
                                   {"bytes_sent", r.bytes_sent},
                                   {"bytes_received", r.bytes_received},
                                   {"messages", r.messages},
                                   {"modeled", r.modeled}}));
      ++run_index;
    }
  json j;
  j["traceEvents"] = std::move(events);
  j["displayTimeUnit"] = "ms";
  j["otherData"] = {{"producer", "shardlab"}, {"cases", json::array()}};
  for (const auto& src : sources) j["otherData"]["cases"].push_back(src.label);
  return j.dump(1);
}

int keep_trace_file(const std::string& path, const std::vector<TraceSource>& sources) {
  try {
    write_trace(path, sources);
    return 0;
  } catch (const Error& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 3;
  }
}

void refuse_trace_without_run(const std::string& trace, const std::string& why) {
  if (!trace.empty())
    throw Error(ErrorKind::parse, "--trace records the devices of a run, and " + why + " runs none; leave one of them out");
}

void write_trace(const std::string& path, const std::vector<TraceSource>& sources) {
  const std::string text = trace_json(sources);
  write_file_whole(path, "trace", [&](std::ostream& out) { out << text << '\n'; });
}

}  // namespace shardlab
