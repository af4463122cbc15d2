#include "harness/cli/cmd_soak.hpp"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>

#include <optional>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "collectives/mpi.hpp"
#include "collectives/runtime.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "core/wrap.hpp"
#include "harness/check/progress.hpp"
#include "harness/check/report.hpp"
#include "harness/cli/cli.hpp"
#include "harness/check/session.hpp"
#include "core/table.hpp"
#include "harness/models/case_run.hpp"
#include "harness/models/matmul_case.hpp"

namespace shardlab {
namespace {

constexpr double kMinMinutes = 0.01;  // a case takes well under a second

struct SoakOptions {
  double minutes = 1;
  int cases = 0;  // 0: until the minutes are up
  std::uint64_t seed = 0;
  std::string backend = "sim";
  std::string dtype = "all";  // one element type for every case, or all three drawn at random
  bool json = false;
};

double resident_mib() {
  std::ifstream statm("/proc/self/statm");
  double pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

// Meshes of two axes (the matmul cases' X and Y): any on sim; under MPI those with one device per
// process.
std::vector<std::string> meshes(Backend backend) {
  if (backend == Backend::sim) return {"X=2,Y=2", "X=2,Y=4", "X=4,Y=2", "X=1,Y=4", "X=3,Y=2", "X=4,Y=4"};
  const int n = mpi::world_size();
  std::vector<std::string> out = {"X=1,Y=" + std::to_string(n), "X=" + std::to_string(n) + ",Y=1"};
  if (n % 2 == 0 && n > 2) out.push_back("X=2,Y=" + std::to_string(n / 2));
  return out;
}

const char* const kSpecs[] = {"_,_", "X,_", "_,X", "Y,_", "_,Y", "X,Y", "Y,X"};

// Programs for the program cases (every fourth draw): an FFN and Megatron-style attention, forward
// and backward, each under annotations drawn from its list (A and B: the mesh's two axes). They
// exercise what matmuls do not: the program checker's tolerances (the spread over summation
// orders, harness/check/program_check.hpp) on random meshes, layouts, seeds and element types.
struct SoakProgram {
  const char* body;
  std::vector<const char*> shards;
};
const SoakProgram kPrograms[] = {
    {R"(dims = { b = 2, s = 4, m = 16, h = 32 }
inputs = { x = "bsm", W_in = "mh", W_out = "hm" }
ops = [
  { out = "h", op = "einsum", eq = "bsm,mh->bsh", in = ["x", "W_in"] },
  { out = "g", op = "gelu", in = ["h"] },
  { out = "y", op = "einsum", eq = "bsh,hm->bsm", in = ["g", "W_out"] },
]
outputs = ["y"]
backward = true)",
     {R"(shard = { x = "A,_,B", W_in = "A,B", W_out = "B,A" })", R"(shard = { W_in = "_,B", W_out = "B,_" })",
      R"(shard = { x = "A,_,_" })", R"(shard = { x = "_,B,_", W_in = "_,B", W_out = "B,_", y = "_,B,_" })"}},
    {R"(dims = { b = 2, s = 4, t = 4, m = 16, n = 4, d = 4 }
inputs = { x = "bsm", W_q = "mnd", W_k = "mnd", W_v = "mnd", W_o = "ndm" }
ops = [
  { out = "x_t", op = "rename", in = ["x"], to = "btm" },
  { out = "q", op = "einsum", eq = "bsm,mnd->bsnd", in = ["x", "W_q"] },
  { out = "k", op = "einsum", eq = "btm,mnd->btnd", in = ["x_t", "W_k"] },
  { out = "v", op = "einsum", eq = "btm,mnd->btnd", in = ["x_t", "W_v"] },
  { out = "scores", op = "einsum", eq = "bsnd,btnd->bnst", in = ["q", "k"] },
  { out = "scaled", op = "scale", in = ["scores"], value = 0.5 },
  { out = "p", op = "softmax", in = ["scaled"], over = "t" },
  { out = "o", op = "einsum", eq = "bnst,btnd->bsnd", in = ["p", "v"] },
  { out = "y", op = "einsum", eq = "bsnd,ndm->bsm", in = ["o", "W_o"] },
]
outputs = ["y"]
backward = true)",
     {R"(shard = { W_q = "_,B,_", W_k = "_,B,_", W_v = "_,B,_", W_o = "B,_,_" })", R"(shard = { x = "A,_,_" })",
      R"(shard = { x = "A,_,_", W_q = "_,B,_", W_k = "_,B,_", W_v = "_,B,_", W_o = "B,_,_" })",
      R"(shard = { x = "_,_,B" })"}}};
const std::size_t kSizes[] = {4, 8, 12, 16, 24, 32};
const DType kTypes[] = {DType::float32, DType::float64, DType::bfloat16};

// What one element type's cases did: how many, how many passed, and the seconds spent on them
// (how long a run with --dtype all gave each type).
struct TypeTally {
  int run = 0, passed = 0;
  double seconds = 0;
  double weakest = 0;  // the largest power (verify.hpp) of its checks
};

struct Tally {
  int run = 0, passed = 0, skipped = 0, programs = 0;
  std::map<DType, TypeTally> types;
  int weak = 0;  // checks above their floor
  double rss_warm = 0, rss_end = 0;
  bool warm = false;     // past the warm-up: rss_warm is measured
  int runs_at_warm = 0;  // cases run by then
  std::string first_failure;
  std::string first_weak;  // the first check above its floor, and where
};

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::size_t draw(std::mt19937_64& rng, std::size_t n) { return static_cast<std::size_t>(rng() % n); }

// The element types --dtype asks for, once --minutes and the backend are known to be usable.
std::vector<DType> checked_types(const SoakOptions& o, Backend backend) {
  // Whether a case fits in the minutes is decided here, never by the clock: under --minutes 0.01
  // (0.6 s) a loaded machine may finish no case in time, so at least one case always runs.
  if (!(o.minutes >= kMinMinutes && o.minutes <= 24 * 60))
    throw Error(ErrorKind::parse, "--minutes is " + format_number(o.minutes, "%g") + "; give at least " +
                                      format_number(kMinMinutes, "%g") + " (0.6 s) and at most 1440");
  if (backend == Backend::mpi && launched_processes() == 0)
    throw Error(ErrorKind::world_size, "--backend mpi soaks processes started by mpiexec; run mpiexec -n 2 "
                                       "build/bin/shardlab soak --backend mpi");
  if (o.dtype == "all") return std::vector<DType>(std::begin(kTypes), std::end(kTypes));
  try {
    return {parse_dtype(o.dtype)};
  } catch (const Error&) {
    throw Error(ErrorKind::parse, "--dtype is '" + o.dtype + "'; give one of " + dtype_names() + "|all");
  }
}

// One FFN or attention program, forward and backward, drawn at random; false when its annotations
// do not fit the mesh (no case).
bool run_program_case(Tally& t, const SoakOptions& o, const Mesh& mesh, const std::vector<DType>& types,
                      std::mt19937_64& rng, Clock::time_point start) {
  const SoakProgram& prog = kPrograms[draw(rng, 2)];
  const std::string shard = prog.shards[draw(rng, prog.shards.size())];
  const DType dtype = types[draw(rng, types.size())];
  const std::uint64_t seed = rng() % 1000000;
  const double case_start = seconds_since(start);
  CommonOptions opts;
  opts.mesh = mesh.text();
  opts.backend = o.backend;
  opts.dtype = dtype_name(dtype);
  opts.quiet = true;
  Session session("soak_program", opts);
  CaseRun r;
  try {
    const CaseFile c = layout_case(prog.body, shard, "soak_program", session, seed);
    r = run_case(session, c, plan_case(c, session.mesh()), false);
  } catch (const Error& e) {
    // Annotations that do not fit the mesh (a split that does not divide a dim): no case.
    if (e.kind() != ErrorKind::not_divisible && e.kind() != ErrorKind::parse) throw;
    return false;
  }
  ++t.run;
  ++t.programs;
  TypeTally& tt = t.types[dtype];
  ++tt.run;
  tt.seconds += seconds_since(start) - case_start;
  if (!session.runtime().is_root()) return true;  // run_case checked bfloat16 against its replay
  bool ok = true;
  for (const auto& v : r.checks) {
    ok = ok && v.pass;
    if (v.power >= 0) tt.weakest = std::max(tt.weakest, v.power);
    t.weak += is_weak(v, dtype);
    if (is_weak(v, dtype) && t.first_weak.empty())
      t.first_weak = "program on mesh " + mesh.text() + ", " + shard + ", seed " + std::to_string(seed) + ", " +
                     dtype_name(dtype) + ": " + v.name + ": power " + format_number(v.power, "%.2g") + " x RMS";
    if (!v.pass && t.first_failure.empty())
      t.first_failure = "program on mesh " + mesh.text() + ", " + shard + ", seed " + std::to_string(seed) + ", " +
                        dtype_name(dtype) + ": " + v.name + ": " + v.detail;
  }
  t.passed += ok;
  tt.passed += ok;
  return true;
}

// One matmul drawn at random (shape, specs of A and B, type); false when the specs do not divide
// the shape (no case).
bool run_matmul_case(Tally& t, Backend backend, const Mesh& mesh, const std::vector<DType>& types,
                     std::mt19937_64& rng, Clock::time_point start) {
  const std::string shape = std::to_string(kSizes[draw(rng, 6)]) + "," + std::to_string(kSizes[draw(rng, 6)]) +
                            "," + std::to_string(kSizes[draw(rng, 6)]);
  const std::string sa = kSpecs[draw(rng, 7)], sb = kSpecs[draw(rng, 7)];
  const DType dtype = types[draw(rng, types.size())];
  const std::uint64_t seed = rng();
  const double case_start = seconds_since(start);
  MatmulCase c;
  try {
    c = matmul_case(mesh, shape, sa, sb, seed, element_bytes(dtype));
  } catch (const Error&) {
    return false;
  }
  Runtime rt(backend, false, dtype);
  const RunResult run = rt.run(mesh, plan_spmd(c.plan, c.a, c.b));
  ++t.run;
  TypeTally& tt = t.types[dtype];
  ++tt.run;
  if (!rt.is_root()) {
    tt.seconds += seconds_since(start) - case_start;
    return true;
  }
  std::vector<Verdict> checks = {verify_matmul(mesh, c.plan.out_spec, run, "C", c, dtype)};
  // bfloat16: C against its replay, bit for bit, as Session::finish does (this bare Runtime has
  // no Session; run_case applies it to the program cases).
  cover_by_replays(checks, rt.replays());
  const Verdict& v = checks[0];
  const bool replay_ok = checks.size() < 2 || checks[1].pass;
  const Verdict bytes = planner_agrees(c.plan, summarize(run.ledger));
  tt.seconds += seconds_since(start) - case_start;
  tt.weakest = std::max(tt.weakest, v.power);
  t.weak += is_weak(v, dtype);
  if (is_weak(v, dtype) && t.first_weak.empty())
    t.first_weak = "mesh " + mesh.text() + ", A " + sa + ", B " + sb + ", shape " + shape + ", " + dtype_name(dtype) +
                   ": C: power " + format_number(v.power, "%.2g") + " x RMS";
  if (v.pass && replay_ok && bytes.pass) {
    ++t.passed;
    ++tt.passed;
  } else if (t.first_failure.empty()) {
    t.first_failure = "mesh " + mesh.text() + ", A " + sa + ", B " + sb + ", shape " + shape + ", " +
                      dtype_name(dtype) + ": " + (!v.pass ? v.detail : !replay_ok ? checks[1].detail : bytes.detail);
  }
  return true;
}

// Resident memory's growth after the warm-up. Memory is judged only over enough cases after the
// warm-up: a handful still fill the allocator. A sanitizer's allocator keeps freed memory in
// quarantine and its shadow grows with what was touched, so resident memory says nothing about our
// leaks there (ASan's leak check does).
struct Growth {
  bool sanitized = false, judged = false;
  double ratio = 0;  // (end - warm) / warm
};

Growth memory_growth(const Tally& t) {
  Growth g;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  g.sanitized = true;
#endif
  g.judged = !g.sanitized && t.run - t.runs_at_warm >= 20;
  g.ratio = g.judged && t.rss_warm > 0 ? (t.rss_end - t.rss_warm) / t.rss_warm : 0;
  return g;
}

// The root's report: the text, with a table of each element type's cases, or one JSON object.
void print_soak(const SoakOptions& o, const Tally& t, const Growth& g, bool pass, double seconds) {
  // Each element type's cases, seconds and weakest check (its power, verify.hpp: the smallest
  // error in one element it is sure to catch, x RMS), against the type's floor.
  Table types_table({"type", "cases", "passed", "seconds", "weakest catches", "floor (x RMS)"});
  std::string weakest = "exact, no tolerance";  // the weakest check over its type's floor, in words
  double weakest_over_floor = 0;
  for (const auto& [dtype, tt] : t.types) {
    Verdict w;  // the type's weakest power, as a check's (power_cell: "exact", "3.6e-06 x RMS")
    w.power = tt.weakest;
    w.tolerance = tt.weakest;
    types_table.add({dtype_name(dtype), std::to_string(tt.run), std::to_string(tt.passed),
                     format_number(tt.seconds, "%.1f"), power_cell(w), format_number(power_floor(dtype), "%.0e")});
    if (tt.weakest / power_floor(dtype) > weakest_over_floor) {
      weakest_over_floor = tt.weakest / power_floor(dtype);
      weakest = "weakest " + power_phrase(w) + " (" + dtype_name(dtype) + ")";
    }
  }
  const std::string verdict =
      std::string(pass ? "PASS" : "FAIL") + " soak: " + std::to_string(t.passed) + " of " + std::to_string(t.run) +
      " cases verified, " + weakest + (t.weak > 0 ? ", " + std::to_string(t.weak) + " checks WEAK," : std::string()) + " in " +
      format_number(seconds, "%.1f") + " s (" + o.backend + "), resident memory " +
      format_number(t.rss_warm, "%.1f") + " -> " + format_number(t.rss_end, "%.1f") + " MiB after warm-up (" +
      (g.judged      ? format_number(100 * g.ratio, "%+.1f") + "%, limit +5%)"
       : g.sanitized ? std::string("not judged in a sanitizer build)")
                     : std::string("too few cases after the warm-up to judge)"));
  if (o.json) {
    nlohmann::ordered_json j = {{"pass", pass},          {"backend", o.backend},    {"cases_run", t.run},
                                {"cases_passed", t.passed}, {"cases_skipped", t.skipped}, {"seconds", seconds},
                                {"rss_warm_mib", t.rss_warm}, {"rss_end_mib", t.rss_end}, {"rss_growth", g.ratio},
                                {"rss_judged", g.judged}, {"first_failure", t.first_failure},
                                {"weak_checks", t.weak}, {"first_weak", t.first_weak}, {"programs_run", t.programs}};
    for (const auto& [dtype, tt] : t.types) {
      j["weakest_power"][dtype_name(dtype)] = tt.weakest;
      j["types"][dtype_name(dtype)] = {{"cases_run", tt.run}, {"cases_passed", tt.passed},
                                       {"seconds", tt.seconds}, {"weakest_power", tt.weakest}};
    }
    std::cout << j.dump(2) << std::endl;
    return;
  }
  std::cout << "shardlab soak: random matmul cases (meshes, specs A and B, shapes, "
            << (o.dtype == "all" ? "float32/float64/bfloat16" : o.dtype) << "), seed "
            << o.seed << ",\n  and every fourth an FFN or attention program, forward and backward ("
            << t.programs << " run)\n  each checked against the unsharded product or program and the planner's bytes; "
            << t.skipped << " draws skipped (specs that do not divide the shape)\n";
  if (!t.first_failure.empty()) std::cout << wrap_lines("  first failure: " + t.first_failure) << "\n";
  if (!t.first_weak.empty()) std::cout << wrap_lines("  first WEAK check: " + t.first_weak) << "\n";
  std::cout << "  each element type's cases, the seconds spent on them, and its weakest check's power (the\n"
               "  smallest error in one element it is sure to catch); "
            << t.weak << " checks above their floor (WEAK)\n"
            << types_table.text();
  std::cout << wrap_lines(verdict) << "\n";
}

int soak(const SoakOptions& o) {
  const Backend backend = parse_backend(o.backend);
  const std::vector<DType> types = checked_types(o, backend);
  Runtime probe(backend);  // starts MPI once for the whole soak
  const std::vector<std::string> mesh_list = meshes(backend);
  std::mt19937_64 rng(o.seed);
  const auto start = Clock::now();
  const double budget = o.minutes * 60;
  Tally t;
  progress::enable("shardlab soak", !o.json && process_is_root());
  std::optional<progress::Phase> shown;  // ended before the results print
  shown.emplace("random cases", o.cases > 0 ? 0 : budget, o.cases > 0 ? o.cases : 0);
  for (int i = 0;; ++i) {
    shown->advance(o.cases > 0 ? t.run : i);
    // Every rank draws the same case; whether to go on is agreed, since clocks differ. --cases
    // counts cases run, not draws (a draw whose specs do not divide its shape is no case); a mesh
    // list on which draws almost never fit gives up after 100 draws per case asked.
    const double elapsed = seconds_since(start);
    const bool more = o.cases > 0 ? t.run < o.cases && i < 100 * o.cases : elapsed < budget || (t.run == 0 && i < 100);
    if ((backend == Backend::mpi ? mpi::agree(more ? 0 : 1) : (more ? 0 : 1)) != 0) break;
    // The warm-up also waits for a few program cases: their first runs grow the heap once.
    const bool past_warmup = (o.cases > 0 ? t.run >= o.cases / 5 : elapsed >= budget / 5) && t.programs >= 6;
    if (past_warmup && !t.warm) {
      t.rss_warm = resident_mib();
      t.runs_at_warm = t.run;
      t.warm = true;
    }
    const Mesh mesh = Mesh::parse(mesh_list[draw(rng, mesh_list.size())]);
    // Every fourth draw a program case (the first draw too: the warm-up must see one).
    const bool ran = i % 4 == 0 ? run_program_case(t, o, mesh, types, rng, start)
                                : run_matmul_case(t, backend, mesh, types, rng, start);
    t.skipped += !ran;
  }
  shown.reset();
  // A verdict over no case would say nothing: refuse it (every rank counted the same draws).
  if (t.run == 0)
    throw Error(ErrorKind::parse, "soak ran no case: all " + std::to_string(t.skipped) + " random draws on the meshes " +
                                      join(mesh_list, " ") + " had specs that do not divide their shapes; " +
                                      (backend == Backend::mpi ? "run it on 2, 4 or 8 processes" : "give more --minutes"));
  if (o.cases > 0 && t.run < o.cases)
    throw Error(ErrorKind::parse, "soak ran " + std::to_string(t.run) + " of the " + std::to_string(o.cases) +
                                      " cases asked in " + std::to_string(t.run + t.skipped) + " draws on the meshes " +
                                      join(mesh_list, " ") + "; run it on 2, 4 or 8 processes");
  t.rss_end = resident_mib();
  if (!t.warm) t.rss_warm = t.rss_end;
  const Growth g = memory_growth(t);
  // Only the root verifies; every rank watches its own memory.
  // A check above its floor (WEAK) could pass a wrong answer: it fails the soak like a FAIL.
  const bool pass = (!process_is_root() || (t.passed == t.run && t.run > 0 && t.weak == 0)) && g.ratio < 0.05;
  if (process_is_root()) print_soak(o, t, g, pass, seconds_since(start));
  const int status = pass ? 0 : 1;
  return backend == Backend::mpi ? mpi::agree(status) : status;
}

}  // namespace

Command add_soak_command(CLI::App& app) {
  auto o = std::make_shared<SoakOptions>();
  auto* c = app.add_subcommand("soak", "run random valid matmul cases for a while, each verified, watching that "
                                       "resident memory stays flat (make soak)");
  c->add_option("--minutes", o->minutes, "how long to run: at least 0.01 (0.6 s), and at least one case runs however long it takes")->capture_default_str();
  at_least(c->add_option("--cases", o->cases, "stop after this many cases instead (0: run for --minutes)"), 0);
  c->add_option("--seed", o->seed, "seed of the random cases")->capture_default_str();
  c->add_option("--backend", o->backend, "sim (threads) or mpi (mpiexec -n 2 ... --backend mpi)")->capture_default_str();
  c->add_option("--dtype", o->dtype, "element type of every case: " + dtype_names() + ", or all (drawn at random)")
      ->capture_default_str();
  c->add_flag("--json", o->json, "print one JSON object instead of the text");
  return {c, [o] { return soak(*o); }};
}

}  // namespace shardlab
