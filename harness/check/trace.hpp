// --trace FILE: every traced run of a lesson or command as one timeline in the Chrome Trace Event
// Format (JSON), which ui.perfetto.dev and chrome://tracing open. One process per device (pid d + 1,
// named "device d", args.device d); in each,
// a "compute" track (core ops as they nest: einsum, gelu, sum ...) and a "communication" track
// (one event per ledger row, named "<op> <tensor> over <axes>", with its bytes in args). Times are
// microseconds from the first event.
#pragma once
#include <string>
#include <vector>

#include "collectives/runtime.hpp"

namespace shardlab {

struct TraceSource {
  std::string label;  // the case or lesson the runs belong to
  std::vector<TraceRun> runs;
};

// The trace as JSON text.
std::string trace_json(const std::vector<TraceSource>& sources);
// Writes it whole or not at all (core/write_file.hpp); Error(io) naming the path.
void write_trace(const std::string& path, const std::vector<TraceSource>& sources);
// write_trace after the run has printed its results: 0, or 3 after one sentence on stderr (the
// run happened; only its timeline could not be kept).
int keep_trace_file(const std::string& path, const std::vector<TraceSource>& sources);
// --trace with nothing to record (--plan-only runs no devices): Error(parse) saying so.
void refuse_trace_without_run(const std::string& trace, const std::string& why);
// Names a ledger row's event: "all_gather A over Y", "send h to 1", "recv h from 0".
std::string trace_event_name(const LedgerRow& row);

}  // namespace shardlab
