#include "harness/cli/cmd_check.hpp"
#include "harness/check/progress.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>

#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "core/wrap.hpp"
#include "harness/check/case_file.hpp"
#include "harness/check/junit.hpp"
#include "harness/check/trace.hpp"
#include "harness/check/session.hpp"
#include "core/write_file.hpp"
#include "harness/models/case_run.hpp"
#include "harness/cli/timeout_option.hpp"

namespace shardlab {

namespace {

namespace fs = std::filesystem;

struct CheckOptions {
  CommonOptions common;
  std::vector<std::string> paths;
  std::string junit;
  double memory_limit = kCaseLimitGiB;
  std::string uneven;  // "": each case's own rule
  std::string inputs;  // --inputs: every case reads the inputs it names from here
};

// The case files under `paths`, in order: a directory's *.toml sorted by path. A path that is
// neither is kept, to be reported as an invalid file.
std::vector<std::string> case_files(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::error_code ec;
    if (!fs::is_directory(p, ec)) {
      out.push_back(p);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& e : fs::recursive_directory_iterator(p, ec))
      if (e.is_regular_file() && e.path().extension() == ".toml") found.push_back(e.path().string());
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run(const CheckOptions& o) {
  parse_memory_limit(o.memory_limit);  // a bad limit: exit 2 before anything runs
  with_uneven(CaseFile{}, o.uneven);   // so is a bad --uneven
  if (!o.junit.empty()) check_writable(o.junit, "the JUnit file");  // before running anything
  if (!o.common.trace.empty()) check_writable(o.common.trace, "trace");
  const std::vector<std::string> files = case_files(o.paths);
  std::vector<std::pair<std::string, std::string>> inputs;
  for (const auto& f : files) inputs.push_back({"the case file", f});
  refuse_shared_paths({{"--junit", o.junit}, {"--trace", o.common.trace}}, inputs);
  if (files.empty())
    throw Error(ErrorKind::io, "no case files (*.toml) under " + join(o.paths, ", ") + ": nothing to check");
  parse_backend(o.common.backend);  // a bad value is the command's error, not every case's
  if (o.common.backend == "mpi" && launched_processes() == 0)
    throw Error(ErrorKind::world_size, "--backend mpi checks cases on processes started by mpiexec; run mpiexec -n <devices> "
                                       "build/bin/shardlab check ... --backend mpi");
  std::vector<TraceSource> traces;  // one per case file run, all in one timeline
  const bool root = process_is_root();
  std::vector<JunitSuite> suites;
  int passed = 0, failed = 0, invalid = 0;
  progress::enable("shardlab check", !o.common.json && !o.common.quiet && root);
  progress::Phase shown("case files", 0, static_cast<double>(files.size()));
  for (const auto& path : files) {
    shown.advance(static_cast<double>(&path - files.data()));
    const auto t0 = std::chrono::steady_clock::now();
    JunitSuite suite;
    suite.name = path;
    std::string line;
    try {
      const CaseFile c = with_uneven(read_case_file(path, o.inputs), o.uneven);
      CommonOptions common = case_options(c, o.common);
      common.quiet = true;
      common.json = false;
      common.trace.clear();  // the sessions record; this command writes one file for all
      const int needed = Mesh::parse(c.mesh).devices();
      if (!c.plan_only && common.backend == "mpi" && launched_processes() > 0 && launched_processes() != needed)
        throw Error(ErrorKind::world_size, path + ": mesh " + c.mesh + " needs " + std::to_string(needed) +
                                               " processes, this run has " + std::to_string(launched_processes()) +
                                               " (check it under mpiexec -n " + std::to_string(needed) + ")");
      // A plan_only case runs on no devices: its expectations are held to its plan.
      Session session(c.program.name, common, !c.plan_only);
      if (!o.common.trace.empty()) session.runtime().record_trace();
      const ProgramPlan plan = plan_case(c, session.mesh());
      if (!c.plan_only)
        refuse_case_over_memory(c, plan, common.backend == "mpi" ? 1 : session.mesh().devices(),
                                parse_memory_limit(o.memory_limit));
      const CaseRun r = c.plan_only ? check_plan(c, plan) : run_case(session, c, plan);
      if (!c.plan_only && !o.common.trace.empty()) traces.push_back({c.program.name, session.runtime().trace()});
      const bool pass = case_passed(c, r, session.report());
      std::string first;
      std::vector<Verdict> all = r.checks;  // the layout's checks, then the gradient rules'
      all.insert(all.end(), r.rule_checks.begin(), r.rule_checks.end());
      for (const auto& v : all) {
        JunitCase k;
        k.name = v.name;
        const bool weak = is_weak(v, session.dtype());
        k.power = v.power;
        k.power_floor = v.power >= 0 ? floor_for(v, session.dtype()) : -1;
        k.pass = v.pass && (!weak || !c.allow_weak.empty());
        k.message = !v.pass ? check_text(v) : weak ? weak_text(v, session.dtype()) + (k.pass ? "; allowed: " + c.allow_weak : "") : "";
        suite.cases.push_back(k);
        if (!k.pass && first.empty()) first = v.name + ": " + k.message;
      }
      if (!pass && first.empty()) first = "a collective's measured bytes differ from its prediction";
      const int weak = power_summary(all, session.dtype()).weak;  // above the floor (verify.hpp)
      (pass ? passed : failed) += 1;
      // The file is named when its case is named otherwise, or failed (to open it next).
      const std::string stem = std::filesystem::path(path).stem().string();
      line = std::string(pass ? "PASS " : "FAIL ") + c.program.name +
             (pass && stem == c.program.name ? "" : " (" + path + ")") + ": " + std::to_string(r.collectives.size()) +
             (r.collectives.size() == 1 ? " collective, " : " collectives, ") + std::to_string(r.bytes_per_device) + " B/device, " + std::to_string(all.size()) +
             " checks" + (c.plan_only ? " (planned, not run)" : "") + ", " + checks_power_phrase(all, session.dtype()) +
             (weak ? ", " + std::to_string(weak) + " WEAK" + (c.allow_weak.empty() ? "" : " (allowed)") : "") +
             (pass ? "" : "; " + first);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::fault) throw;  // a runtime fault (a collective timeout) ends the check: exit 3
      ++invalid;
      JunitCase k;
      k.name = "case file";
      k.pass = false;
      k.error = true;
      k.message = e.what();
      suite.cases = {k};
      line = std::string("ERROR ") + e.what();  // the message names the file
    }
    suite.seconds = since(t0);
    if (!suite.cases.empty()) suite.cases.back().seconds = suite.seconds;
    progress::clear();  // the case's line starts on a clean line of the terminal
    if (root) std::cout << wrap_lines(line) << std::endl;  // a long name or failure continues indented
    suites.push_back(std::move(suite));
  }
  if (root) {
    std::cout << passed << " passed, " << failed << " failed" << (invalid ? ", " + std::to_string(invalid) + " invalid" : "")
              << std::endl;
    if (!o.junit.empty()) {
      try {  // checked up front: a failure now (a full disk) is a runtime fault
        write_junit(o.junit, suites);
      } catch (const Error& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 3;
      }
    }
    if (!o.common.trace.empty() && keep_trace_file(o.common.trace, traces) != 0) return 3;
  }
  return invalid ? 2 : failed ? 1 : 0;
}

}  // namespace

Command add_check_command(CLI::App& app) {
  auto o = std::make_shared<CheckOptions>();
  auto* c = app.add_subcommand("check",
                               "run case files (directories searched for *.toml), one line each, for CI; "
                               "exit 0 all pass, 1 a check failed, 2 a file is invalid");
  c->add_option("paths", o->paths, "case files or directories, e.g. harness/cases")->required();
  c->add_option("--junit", o->junit, "also write JUnit XML here (one testsuite per file, one testcase per check)");
  c->add_option("--memory-limit", o->memory_limit, "GiB each case may use (default 1: a case is checked in seconds)");
  c->add_option("--trace", o->common.trace, "also write every case's timeline here (Chrome Trace JSON)");
  c->add_option("--uneven", o->uneven,
                "a dim that does not divide its mesh axes, instead of each file's rule (default chunk): chunk "
                "(as torch.chunk), pad (as JAX) or none (refuse it)");
  c->add_option("--inputs", o->inputs,
                "every case reads the inputs this .npz or folder of NAME.npy names from it (in place of its "
                "inputs_from), the rest generated");
  add_collective_timeout(c, o->common.collective_timeout);
  c->add_option("--backend", o->common.backend, "sim (threads, default) or mpi (run under mpiexec)")
      ->capture_default_str();
  return {c, [o] { return run(*o); }};
}

}  // namespace shardlab
