// Command lines for lessons and tools, built with CLI11 (kept out of this header: it is slow to
// compile). Every binary shares the common flags; a lesson adds its own with option()/flag().
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "harness/check/options.hpp"

namespace CLI {
class App;
class Option;
}

namespace shardlab {

// After CLI11 has parsed: refuses, with one sentence on stderr (root only) and status 2, any option
// given an empty value, a negative or overflowing or non-decimal whole number, or a non-finite
// number, in `app` and its chosen subcommands. Returns -1 when every value is well formed.
int refuse_bad_values(const CLI::App& app, const std::string& program);

// For an integer option: a CLI11 check that refuses a value below `lo` with "is 0; give at least 1".
void at_least(CLI::Option* option, long lo);
// Refuses a value outside lo..hi (one sentence, exit 2).
void within(CLI::Option* option, long lo, long hi);

// The options a command that runs on devices shares with the lessons: --collective-timeout,
// --backend (its help says how many processes mpiexec needs: `processes`, e.g. "<devices>"),
// --seed, --dtype, --json, --quiet, --trace and --inject, into `common`.
void add_run_options(CLI::App* command, CommonOptions& common, const std::string& processes);
// --uneven chunk|pad|none into `uneven` (chunk by default): how a dim that does not divide its mesh
// axes is split (core/mesh.hpp's Uneven; parse_uneven refuses other values).
void add_uneven_option(CLI::App* command, std::string& uneven);

class Cli {
 public:
  Cli(const std::string& name, const std::string& description, const std::string& default_mesh);
  ~Cli();
  void option(const std::string& flags, std::string& target, const std::string& help);
  void option(const std::string& flags, int& target, const std::string& help);
  void flag(const std::string& flags, bool& target, const std::string& help);
  // -1: go on. Otherwise the exit status to return now: 0 after --help (printed), 2 after a bad
  // flag (one sentence on stderr).
  int parse(int argc, char** argv);
  // For a lesson on a line of devices: under --backend mpi without --mesh, the line gets one
  // device per process (`mpiexec -n 8 ... --backend mpi` runs axis=8, not the default).
  void mesh_follows_processes(const std::string& axis);
  // --uneven chunk|pad|none into common.uneven (chunk by default; add_uneven_option).
  void uneven_option();
  // --inputs FILE.npz|FOLDER into common.inputs: the lesson's named input tensors read from it
  // (harness/models/case_run_io.hpp), the rest generated as without it.
  void inputs_option();
  CommonOptions common;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Devices on a line (one-axis lessons and FFN strategies): one per process when started by
// mpiexec with --backend mpi, else `fallback`.
int line_devices(const CommonOptions& common, int fallback);

// Before anything prints: a closed descriptor 0, 1 or 2 gets /dev/null opened read-only in its
// place, so no file the run opens takes that number (a report written into a trace file) and a
// write to it still fails. Called by Cli and shardlab's main; idempotent.
void hold_standard_streams();
// A report that cannot be written is a fault: flushes standard output and, when a write to it
// failed (/dev/full, a closed descriptor, a full disk), says so in one line on stderr and returns
// 3; otherwise `status`. guarded() and the --help paths end with it.
int checked_stdout(int status);

// Runs `body` and turns a shardlab::Error into one sentence on stderr (from the root process only)
// and exit status 2 (3 for ErrorKind::fault); any other exception likewise becomes a sentence and status 2.
// Then checked_stdout: output that could not be written is exit 3.
int guarded(const std::function<int()>& body);

}  // namespace shardlab
