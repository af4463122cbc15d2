// One case file (harness/check/case_file.hpp) end to end: propagate its annotations, plan every op,
// run the program on the session's devices, verify each output against the unsharded program with
// the bounds of harness/check/program_check.hpp, and hold the run to the file's expectations.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "harness/check/case_file.hpp"
#include "harness/check/report.hpp"
#include "harness/check/session.hpp"
#include "harness/models/case_run_io.hpp"
#include "harness/plan/program_plan.hpp"

namespace shardlab {

struct CaseRun {
  ProgramPlan plan;
  std::vector<Verdict> checks;          // each output, then each expectation, then memory
  // The gradient rules against central differences (float64, the unsharded program on inputs of
  // its own): checks of the derivation, the same whatever the layout, so kept apart from `checks`.
  std::vector<Verdict> rule_checks;
  std::vector<std::string> collectives; // what the ledger saw: "all_gather x over Y", in order
  std::size_t bytes_per_device = 0;     // the busiest device's bytes sent, whole run
  std::size_t peak_bytes = 0, predicted_peak_bytes = 0;
  InputsUsed inputs_used;                // which inputs came from the case's files
  std::vector<PowerLimit> power_limits;  // each output's check: the element that sets its power
  // With run_case's `keep`: --save's arrays (case_run_io.hpp's saved_arrays), root only.
  std::vector<std::pair<std::string, Tensor>> saved;
};

// The session's mesh and dtype must be the case's (case_options gives them). Throws Error(parse)
// for annotations that do not fit; Error(unsupported) when an op cannot be planned.
ProgramPlan plan_case(const CaseFile& c, const Mesh& mesh);
// `rules`: also check the gradient rules (a backward case); a lesson running one program under
// several layouts asks once. `keep`: fill CaseRun::saved. The inputs are case_inputs(c, ...).
CaseRun run_case(Session& session, const CaseFile& c, const ProgramPlan& plan, bool rules = true, bool keep = false);
// Before anything is allocated: refuses (one sentence with the estimate) a case whose unsharded
// tensors (held in float64 four times: inputs, reference, assembled outputs, comparison) plus every
// device's predicted peak, times `devices_here` (the mesh on sim, 1 under MPI), exceed
// `limit_gib` (run/check --memory-limit, default kCaseLimitGiB) or what the machine has available.
constexpr double kCaseLimitGiB = 1.0;
void refuse_case_over_memory(const CaseFile& c, const ProgramPlan& plan, int devices_here,
                             double limit_gib = kCaseLimitGiB);
// --memory-limit GIB on run and check: a positive, finite number of GiB; else Error(parse).
double parse_memory_limit(double gib);
// A plan_only case: the file's expectations held to the plan's collectives, bytes and peak memory
// (the same checks, nothing run and no tensor built).
CaseRun check_plan(const CaseFile& c, const ProgramPlan& plan);
// The common flags of a run of this case: its mesh, dtype and seed over `base`'s backend and output.
CommonOptions case_options(const CaseFile& c, const CommonOptions& base);
// The case in element type `dtype` (Error(parse) for a name that is none): [expect]'s byte and
// memory limits hold as many elements as before, each of the new size (floor(limit / old size)
// elements of new size bytes).
CaseFile with_dtype(CaseFile c, const std::string& dtype);
// The case with `uneven` (chunk, pad or none) in place of its own; unchanged when `uneven` is
// empty. Error(parse) for any other word.
CaseFile with_uneven(CaseFile c, const std::string& uneven);

// One check for people, with its power: v.line() (verify.hpp), the name the lessons print it by.
std::string check_text(const Verdict& v);
// Every check passed, none is WEAK (unless c.allow_weak says why) and every collective moved the
// bytes predicted for it.
bool case_passed(const CaseFile& c, const CaseRun& r, const Report& report);

// Lessons that run one program under several layouts (12, 13). `text` with A and B replaced by
// the names of a 2-axis mesh's axes.
std::string with_mesh_axes(const std::string& text, const Mesh& mesh);
// The case of one layout: the program's TOML `body`, then `shard` (its specs writing A and B for
// the mesh's axes), on the session's mesh, element type and `seed`; `label` names it in messages.
CaseFile layout_case(const std::string& body, const std::string& shard, const std::string& label,
                     const Session& session, std::uint64_t seed);
// A run's checks into `report`, each named "<layout>: <check>"; the failing ones printed to `out`.
// Returns how many passed.
int add_layout_checks(Report& report, const std::string& layout, const CaseRun& run, std::ostream& out);
// The run's gradient-rule checks into `report`, each named "gradient rules: <check>", the failing
// ones printed to `out`; returns how many passed.
int add_rule_checks(Report& report, const CaseRun& run, std::ostream& out);

// For people: the program, every tensor's spec and origin, and the plan of each op.
std::string case_plan_text(const CaseFile& c, const ProgramPlan& plan);

}  // namespace shardlab
