#include "harness/check/session.hpp"

#include "core/wrap.hpp"
#include "harness/check/progress.hpp"

#include <limits>

#include <cmath>

#include <algorithm>
#include <iostream>

#include "collectives/watchdog.hpp"
#include "core/error.hpp"
#include "harness/check/trace.hpp"
#include "harness/check/verdict_details.hpp"
#include "core/write_file.hpp"

namespace shardlab {

namespace {
std::ostream& null_stream() {
  static std::ostream sink(nullptr);
  return sink;
}

// Where the devices ran, said once beside the verdict: a run under mpiexec and a run on threads
// print the same report otherwise.
std::string where_it_ran(const Runtime& runtime, int devices) {
  const std::string n = std::to_string(devices);
  if (runtime.backend() == Backend::mpi)
    return "ran on " + n + " MPI process" + (devices == 1 ? "" : "es") + " (mpiexec -n " + n + "), one device each" +
           (runtime.native() ? ", with MPICH's own collectives" : "");
  return "ran on a simulated mesh: " + n + (devices == 1 ? " device as a thread" : " devices as threads") +
         " of one process";
}
}  // namespace

Session::Session(const std::string& case_name, const CommonOptions& options, bool devices)
    : options_(options), mesh_(Mesh::parse(options.mesh)), devices_(devices) {
  mesh_.set_uneven(parse_uneven(options.uneven));
  set_collective_timeout(options.collective_timeout);
  const DType dtype = parse_dtype(options.dtype);
  runtime_ = std::make_unique<Runtime>(parse_backend(options.backend), options.collectives == "native", dtype);
  if (options.replay == "off") runtime_->set_replay(false);
  const Fault fault = parse_fault(options.inject);
  refuse_unplantable(fault, dtype);
  runtime_->inject(fault);
  // A wrong process count is a setup error: say so before any part of a report is printed.
  if (devices) runtime_->check_mesh(mesh_);
  if (!options.trace.empty()) {
    if (!devices) refuse_trace_without_run(options.trace, "--plan-only");
    // A bad path fails now, not after the run. Only the root writes it, so only the root asks;
    // the others learn the outcome (and fail too) rather than wait for a run that will not come.
    std::string why;
    if (runtime_->is_root()) try {
        check_writable(options.trace, "trace");
      } catch (const Error& e) {
        why = e.what();
      }
    if (runtime_->agree(why.empty() ? 0 : 2) != 0)
      throw Error(ErrorKind::io, why.empty() ? "the root process cannot write the trace" : why);
    runtime_->record_trace();
  }
  // Long runs (article-size lessons) say on a terminal where they are, from the printing process.
  // A --json or --quiet session turns nothing off: inside a command that shows its own progress
  // (check) that display stays on.
  if (!options.json && !options.quiet && runtime_->is_root()) progress::enable(case_name, true);
  report_.case_name = case_name;
  report_.backend = options.backend;
  report_.dtype = dtype;
  report_.mesh = mesh_;
}

Session::~Session() = default;

bool Session::talking() const { return runtime_->is_root() && !options_.json && !options_.quiet; }

std::ostream& Session::out() {
  if (!talking()) return null_stream();
  if (!wrapped_) {
    wrap_ = std::make_unique<LineWrapBuf>(std::cout.rdbuf(), 100);
    wrapped_ = std::make_unique<std::ostream>(wrap_.get());
  }
  return *wrapped_;
}

RunResult Session::run(const SpmdProgram& program) {
  RunResult r = runtime_->run(mesh_, program);
  if (runtime_->is_root()) {
    // Several runs in one session: number their calls on from the previous run's.
    int base = 0;
    for (const auto& row : ledger_) base = std::max(base, row.call + 1);
    for (auto row : r.ledger) {
      row.call += base;
      if (!run_name_.empty()) call_run_[row.call] = run_name_;
      ledger_.push_back(row);
    }
    report_.add_ledger(ledger_);
    for (auto& c : report_.collectives)
      if (const auto it = call_run_.find(c.call); it != call_run_.end()) c.run = it->second;
    const Fault& fault = runtime_->fault();
    if (fault.kind != FaultKind::none) {  // --inject: what was planted, and whether it found a place
      report_.strings["injected"] = fault_text(fault);
      report_.numbers["injected_struck"] = runtime_->struck() ? 1 : 0;
    }
  }
  return r;
}

int Session::keep_trace() {
  if (options_.trace.empty() || !runtime_->is_root()) return 0;
  return keep_trace_file(options_.trace, {TraceSource{report_.case_name, runtime_->trace()}});
}

void Session::cover_replays() {
  if (runtime_->is_root()) cover_by_replays(report_.checks, runtime_->replays());
}

int Session::finish() {
  if (wrap_) wrap_->flush_line();  // before the verdict, in order
  int status = 0;
  cover_replays();
  if (runtime_->is_root()) {
    const Fault& fault = runtime_->fault();
    if (fault.kind != FaultKind::none && !runtime_->struck()) {
      // A planted fault that changed nothing tested nothing: not a success (exit 1, and shardlab
      // power's "-", since the JSON says injected_struck 0).
      Verdict v;
      v.name = "--inject " + fault_text(fault);
      v.pass = false;
      v.detail = "found no place in this run, so nothing was tested";
      v.claim = "structural: a planted fault must change the run";
      report_.checks.push_back(v);
    }
    status = report_.pass() ? 0 : 1;
    if (options_.json) {
      std::cout << report_json(report_) << std::endl;
    } else {
      if (!options_.quiet) {
        const std::string power = power_line(report_);  // above the lines that sit beside the verdict
        if (!power.empty()) std::cout << wrap_lines(power) << "\n";
        std::cout << "element type: " << dtype_text(report_.dtype) << "\n";
        if (devices_) std::cout << where_it_ran(*runtime_, mesh_.devices()) << "\n";
        if (fault.kind != FaultKind::none)
          std::cout << "injected: " << fault_text(fault)
                    << (runtime_->struck() ? " (planted on device " + std::to_string(mesh_.devices() - 1) + ")"
                                           : ", which found no place in this run (nothing here does what it breaks)")
                    << "\n";
        std::cout << verdict_details(report_);  // what a verdict line too wide to hold failed
      }
      std::cout << verdict_line(report_) << std::endl;
    }
    status = std::max(status, keep_trace());
  }
  return runtime_->agree(status);
}

}  // namespace shardlab
