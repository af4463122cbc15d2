// Session: what every lesson and shardlab command sets up from the common flags: the mesh, the
// runtime for the chosen backend, and an output stream that only the root prints to (and only
// in text mode). finish() prints the verdict or the JSON and returns the exit status all agree on.
#pragma once
#include <iosfwd>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "collectives/runtime.hpp"
#include "core/mesh.hpp"
#include "harness/check/options.hpp"
#include "harness/check/report.hpp"

namespace shardlab {

class LineWrapBuf;  // core/wrap.hpp

class Session {
 public:
  // `devices`: false for a session that only plans (--plan-only) and so runs on no devices; then
  // the MPI world need not match the mesh.
  Session(const std::string& case_name, const CommonOptions& options, bool devices = true);
  ~Session();

  const Mesh& mesh() const { return mesh_; }
  Runtime& runtime() { return *runtime_; }
  const CommonOptions& options() const { return options_; }
  DType dtype() const { return runtime_->dtype(); }
  std::size_t element_bytes() const { return shardlab::element_bytes(dtype()); }
  // Text for people: printed by the root only, and not under --json or --quiet.
  std::ostream& out();
  bool talking() const;

  // Runs the program on every device and records its ledger into the report.
  RunResult run(const SpmdProgram& program);
  // Names the runs that follow ("megatron"): their collectives carry it in --json (`run`), so a
  // lesson that runs several layouts in one session keeps them apart.
  void name_runs(const std::string& name) { run_name_ = name; }

  Report& report() { return report_; }
  // Prints the collectives table and verdict (text), or the JSON, and keeps the trace; returns 0
  // pass, 1 fail, 3 when the trace could not be written. The text names the element type and,
  // for a session that ran devices, where they ran (MPI processes or threads of one process).
  int finish();
  // On the root, the report's checks covered by the runs' replays (bfloat16); finish() does it
  // first, and a command that prints its own report calls it before reading the verdict.
  void cover_replays();
  // --trace FILE: the root writes every run's timeline there (harness/check/trace.hpp). Returns 0,
  // or 3 (after one sentence on stderr) when it cannot. For commands that print their own JSON.
  int keep_trace();

 private:
  CommonOptions options_;
  Mesh mesh_;
  bool devices_;  // false: a session that only plans, and so ran nowhere
  std::unique_ptr<Runtime> runtime_;
  Report report_;
  std::vector<LedgerRow> ledger_;  // every run's rows, calls numbered on across runs
  std::string run_name_;
  std::map<int, std::string> call_run_;  // call -> the name of the run that made it
  // out(): std::cout through a buffer that wraps each line at 100 columns (core/wrap.hpp).
  std::unique_ptr<LineWrapBuf> wrap_;
  std::unique_ptr<std::ostream> wrapped_;
};

}  // namespace shardlab
