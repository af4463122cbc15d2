#include "harness/cli/cmd_power.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "collectives/fault.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "core/wrap.hpp"
#include "harness/check/progress.hpp"
#include "core/table.hpp"
#include "harness/check/verify.hpp"

namespace shardlab {
namespace {

struct PowerOptions {
  std::vector<std::string> lessons, cases, dtypes, kinds;
  std::string replay = "on";
  bool list = false, json = false;
};

// One run of the matrix: a lesson binary or `shardlab run CASE`, clean or with a fault.
struct Trial {
  std::string target, dtype, kind;  // kind "" = clean
  std::string command;
  int status = -1;
  bool struck = false;
  std::string caught_by;  // the first failing check, or "" (status 1 without one: the verdict line)
  std::string refusal;    // exit 2: the run's first line on stderr
  // A clean run: the power its weakest comparison of the sharded run claims (verify.hpp; the
  // finite-difference checks of the gradient rules, which never see the sharded run, aside);
  // negative when it claims none. A perturb run: the clean run it plants that power into.
  double claimed = -1;
  std::size_t clean = 0;
};

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::filesystem::path bin_dir() { return std::filesystem::read_symlink("/proc/self/exe").parent_path(); }

// The lesson binaries beside this one, by number ("13" -> 13_transformer_layer).
std::map<std::string, std::string> lesson_binaries() {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(bin_dir())) {
    const std::string name = e.path().filename().string();
    if (name.size() > 3 && std::isdigit(static_cast<unsigned char>(name[0])) &&
        std::isdigit(static_cast<unsigned char>(name[1])) && name[2] == '_')
      out[name.substr(0, 2)] = name;
  }
  return out;
}

// Runs t's command; a run that refuses its input (exit 2) keeps its first stderr line in t.refusal.
void run_trial(Trial& t) {
  char err_path[] = "/tmp/shardlab_power_XXXXXX";
  const int fd = ::mkstemp(err_path);
  if (fd < 0) throw Error(ErrorKind::io, "cannot make a temporary file in /tmp for a run's stderr");
  ::close(fd);
  FILE* p = ::popen((t.command + " 2>" + quoted(err_path)).c_str(), "r");
  if (!p) {
    std::remove(err_path);
    throw Error(ErrorKind::io, "cannot start " + t.command);
  }
  std::string out;
  char buf[65536];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int raw = ::pclose(p);
  t.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + (WIFSIGNALED(raw) ? WTERMSIG(raw) : 0);
  if (t.status == 2)
    if (FILE* e = std::fopen(err_path, "r")) {
      if (std::fgets(buf, sizeof buf, e)) t.refusal = buf;
      std::fclose(e);
      while (!t.refusal.empty() && (t.refusal.back() == '\n' || t.refusal.back() == '\r')) t.refusal.pop_back();
    }
  std::remove(err_path);
  const auto j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return;
  t.struck = j.value("injected_struck", 0) == 1;
  if (!j.contains("checks")) return;
  const double floor = power_floor(parse_dtype(t.dtype));
  for (const auto& c : j["checks"]) {
    if (!c.value("pass", true) && t.caught_by.empty()) t.caught_by = c.value("name", "");
    const auto p = c.find("power"), f = c.find("power_floor");
    if (p == c.end() || f == c.end() || !f->is_number() || f->get<double>() != floor) continue;
    // null: an infinite power (want all zeros, a nonzero tolerance): nothing it claims to catch.
    t.claimed = p->is_number() ? std::max(t.claimed, p->get<double>()) : INFINITY;
  }
}

// The perturbation a run's claim is tested with: one element of each returned block off by the
// claimed power times kClaimMargin (times the element nearest the block's RMS, fault.hpp), at
// least the smallest change the type shows (two unit roundoffs: a check claiming power 0 must see
// one element off by one step); a run that claims nothing, or an infinite power, gets the type's
// floor. The margin: a claim is relative to the RMS of the whole checked tensor and guarantees to
// catch errors above it, while the planted element sits near one device's block RMS, which can be
// a little smaller (data_ffn in float64: an error 0.8% under the claim, which the check rightly
// let pass). 10% keeps the test sharp: a check whose bound is 100x looser than it claims still fails.
constexpr double kClaimMargin = 1.1;
std::string planted_perturbation(const Trial& clean_run) {
  const DType t = parse_dtype(clean_run.dtype);
  const double claimed = clean_run.claimed;
  const double e = claimed < 0 || !std::isfinite(claimed) ? power_floor(t) : std::max(claimed * kClaimMargin, 2 * unit_roundoff(t));
  char text[48];
  std::snprintf(text, sizeof text, "perturb:%.17g", e);
  return text;
}

// What a trial's cell says: PASS/FAIL for a clean run; caught, ESCAPED, - (not applicable) or ERR.
std::string cell(const Trial& t) {
  if (t.kind.empty()) return t.status == 0 ? "PASS" : t.status == 1 ? "FAIL" : "ERR " + std::to_string(t.status);
  if (t.status != 0 && t.status != 1) return "ERR " + std::to_string(t.status);
  if (!t.struck) return "-";
  return t.status == 1 ? "caught" : "ESCAPED";
}

// A column's head: what the fault breaks, short (the table stays under 100 columns).
std::string short_kind(const std::string& k) {
  if (k.rfind("perturb", 0) == 0) return "perturb";
  const std::map<std::string, std::string> heads = {{"skip-add", "add"},         {"gather-offset", "gather"},
                                                    {"swap-blocks", "a2a"},      {"stale-receive", "stale"},
                                                    {"skip-update", "update"},   {"swap-microbatches", "stash"},
                                                    {"wrong-axis", "axis"}};
  const auto it = heads.find(k);
  return it == heads.end() ? k : it->second;
}

// Runs the trials two at a time, with a progress line.
void run_all(const std::vector<Trial*>& trials, const std::string& what) {
  if (trials.empty()) return;
  progress::Phase shown(std::to_string(trials.size()) + " " + what, 0, static_cast<double>(trials.size()));
  std::atomic<std::size_t> next{0}, done{0};
  auto worker = [&] {
    for (std::size_t i; (i = next++) < trials.size();) {
      run_trial(*trials[i]);
      shown.advance(static_cast<double>(++done));
    }
  };
  std::vector<std::thread> pool;
  const unsigned workers = std::max(1u, std::min(2u, std::thread::hardware_concurrency()));
  for (unsigned w = 0; w < workers; ++w) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
}

// A run that refused its input (exit 2) makes the whole request bad input: its sentence, exit 2.
void refuse_bad_input(const std::vector<Trial*>& trials) {
  for (const Trial* t : trials)
    if (t->status == 2)
      throw Error(ErrorKind::parse, t->target + " in " + t->dtype + (t->kind.empty() ? "" : " with " + t->kind) +
                                        " refused its input: " + (t->refusal.empty() ? t->command : t->refusal));
}

// No planted fault found a place in any run: a score over nothing. Plants the kinds not asked for
// on the same runs, to name the ones that apply, and refuses the request (exit 2).
[[noreturn]] void refuse_nothing_planted(const std::vector<Trial>& trials, const std::vector<std::string>& kinds,
                                         const std::vector<std::string>& all_kinds) {
  std::vector<Trial> others;
  for (const auto& t : trials)
    if (t.kind.empty())
      for (const auto& k : all_kinds)
        if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) {
          Trial o = t;
          o.kind = k == "perturb" ? "perturb:0.5" : k;
          o.command = t.command + " --inject " + o.kind;
          others.push_back(o);
        }
  std::vector<Trial*> pointers;
  for (auto& t : others) pointers.push_back(&t);
  run_all(pointers, "runs to find the kinds that apply");
  std::vector<std::string> apply;
  for (const auto& t : others) {
    const std::string k = t.kind.rfind("perturb", 0) == 0 ? "perturb" : t.kind;
    if (t.struck && std::find(apply.begin(), apply.end(), k) == apply.end()) apply.push_back(k);
  }
  std::string list;
  for (const auto& k : apply) list += (list.empty() ? "" : ", ") + k;
  std::string asked;
  for (const auto& k : kinds) asked += (asked.empty() ? "" : ",") + k;
  throw Error(ErrorKind::parse, "--kinds " + asked + " finds no place in these runs, so there is nothing to score; " +
                                    (list.empty() ? "no fault kind applies to them" : "the kinds that apply: " + list));
}

// Under mpiexec every rank starts this command; rank 0 alone runs the matrix and prints it, and
// its runs start as programs of their own (not members of this job): false on the other ranks.
bool mpi_rank_zero() {
  for (const char* rank : {"PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK"})
    if (const char* r = std::getenv(rank); r && std::string(r) != "0") return false;
  for (const char* name : {"PMI_RANK", "PMI_SIZE", "PMI_FD", "PMI_PORT", "PMI_ID", "PMIX_RANK", "PMI_HOSTNAME"})
    ::unsetenv(name);
  return true;
}

// "Checks that caught the most ...: y 12; dx 3": which checks do the work, by count.
std::string top_catchers(const std::vector<Trial>& trials) {
  std::map<std::string, int> by;  // catching check -> count, to show what does the work
  for (const auto& t : trials)
    if (!t.kind.empty() && cell(t) == "caught") {
      std::string name = t.caught_by.empty() ? "(the verdict)" : t.caught_by;
      for (const char* tail : {" vs ", " against ", " ("}) name = name.substr(0, name.find(tail));
      const auto colon = name.find(": ");
      by[colon == std::string::npos ? name : name.substr(colon + 2)]++;
    }
  std::vector<std::pair<int, std::string>> top;
  for (const auto& kv : by) top.push_back({kv.second, kv.first});
  std::sort(top.rbegin(), top.rend());
  std::string most = "Checks that caught the most (--list names the check of every run):";
  for (std::size_t i = 0; i < std::min<std::size_t>(6, top.size()); ++i)
    most += (i ? "; " : " ") + top[i].second.substr(0, 40) + " " + std::to_string(top[i].first);
  return most;
}

// The lessons asked for, by two-digit number (every one beside this shardlab for "all", or when
// neither a lesson nor a case file is named); Error(parse) for one that is not there.
std::vector<std::string> chosen_lessons(const PowerOptions& o, const std::map<std::string, std::string>& binaries) {
  std::vector<std::string> lessons;
  const bool all = (o.lessons.empty() && o.cases.empty()) || std::count(o.lessons.begin(), o.lessons.end(), "all");
  if (all)
    for (const auto& kv : binaries) lessons.push_back(kv.first);
  else
    lessons = o.lessons;
  for (auto& l : lessons) {
    if (l.size() == 1) l = "0" + l;
    if (!binaries.count(l))
      throw Error(ErrorKind::parse, "--lesson " + l + " is not a lesson beside this shardlab (" + bin_dir().string() +
                                        "); give 01 to " + binaries.rbegin()->first);
  }
  return lessons;
}

int power(const PowerOptions& o) {
  if (!mpi_rank_zero()) return 0;
  const auto binaries = lesson_binaries();
  const std::vector<std::string> lessons = chosen_lessons(o, binaries);
  for (const auto& c : o.cases)
    if (!std::filesystem::is_regular_file(c)) throw Error(ErrorKind::io, "case file " + c + " is not a readable file");
  std::vector<std::string> dtypes = o.dtypes.empty() ? std::vector<std::string>{"float64", "float32", "bfloat16"} : o.dtypes;
  for (const auto& d : dtypes) parse_dtype(d);
  std::vector<std::string> all_kinds;
  for (const auto& k : fault_kinds(1.0)) all_kinds.push_back(k.rfind("perturb", 0) == 0 ? "perturb" : k);
  const std::vector<std::string> kinds = o.kinds.empty() ? all_kinds : o.kinds;
  for (const auto& k : kinds)
    if (k != "perturb") parse_fault(k);

  const std::string self = quoted((bin_dir() / "shardlab").string());
  std::vector<Trial> trials;
  const std::string replay = o.replay == "off" ? " --replay off" : "";
  auto add = [&](const std::string& target, std::string base, const std::string& dtype) {
    base += replay;
    Trial t;
    t.target = target;
    t.dtype = dtype;
    t.command = base + " --json";
    t.clean = trials.size();
    trials.push_back(t);
    for (const auto& k : kinds) {
      // perturb: planted just over the power the clean run claims, known once it has run.
      t.kind = k;
      t.command = k == "perturb" ? base : base + " --json --inject " + k;
      trials.push_back(t);
    }
  };
  for (const auto& l : lessons)
    for (const auto& d : dtypes)
      add(binaries.at(l), quoted((bin_dir() / binaries.at(l)).string()) + " --dtype " + d, d);
  for (const auto& c : o.cases)
    for (const auto& d : dtypes)
      add(std::filesystem::path(c).stem().string(), self + " run " + quoted(c) + " --dtype " + d, d);

  if (!o.json) progress::enable("shardlab power", true);
  std::vector<Trial*> clean, planted;
  for (auto& t : trials) (t.kind.empty() ? clean : planted).push_back(&t);
  run_all(clean, "clean runs");
  refuse_bad_input(clean);
  for (auto* t : planted)
    if (t->kind == "perturb") {
      t->kind = planted_perturbation(trials[t->clean]);
      t->command += " --json --inject " + t->kind;
    }
  run_all(planted, "runs with a fault");
  refuse_bad_input(planted);
  if (std::none_of(planted.begin(), planted.end(), [](const Trial* t) { return t->struck; }))
    refuse_nothing_planted(trials, kinds, all_kinds);

  int caught = 0, escaped = 0, not_applicable = 0, broken = 0;
  for (const auto& t : trials) {
    const std::string c = cell(t);
    if (t.kind.empty()) broken += c != "PASS";
    else if (c == "caught") ++caught;
    else if (c == "ESCAPED") ++escaped;
    else if (c == "-") ++not_applicable;
    else ++broken;
  }
  const double score = caught + escaped ? 100.0 * caught / (caught + escaped) : 0.0;
  const bool ok = escaped == 0 && broken == 0 && caught > 0;

  if (o.json) {
    nlohmann::ordered_json j;
    j["runs"] = nlohmann::ordered_json::array();
    for (const auto& t : trials)
      j["runs"].push_back({{"target", t.target}, {"dtype", t.dtype}, {"inject", t.kind.empty() ? "none" : t.kind},
                           {"status", t.status}, {"struck", t.struck}, {"result", cell(t)}, {"caught_by", t.caught_by}});
    j["caught"] = caught;
    j["escaped"] = escaped;
    j["not_applicable"] = not_applicable;
    j["errors"] = broken;
    j["score_percent"] = score;
    j["pass"] = ok;
    std::cout << j.dump(2) << std::endl;
    return ok ? 0 : 1;
  }
  std::vector<std::string> header = {"run", "type", "clean"};
  for (const auto& k : kinds) header.push_back(short_kind(k));
  Table table(header);
  const std::size_t per = 1 + kinds.size();
  for (std::size_t i = 0; i < trials.size(); i += per) {
    std::vector<std::string> row = {trials[i].target.substr(0, 24), trials[i].dtype.substr(0, 8)};
    for (std::size_t k = 0; k < per; ++k) row.push_back(cell(trials[i + k]));
    table.add(row);
  }
  std::cout << "shardlab power: each run clean, then with one fault planted in the sharded path\n"
               "(--inject; perturb: one element off by 1.1 x the power the clean run claims).\n"
               "caught: the verdict turned FAIL; ESCAPED: planted and passed; -: the fault found no place.\n\n"
            << table.text() << "\n";
  if (o.list) {
    std::cout << "Which check caught each:\n";
    for (const auto& t : trials)
      if (!t.kind.empty() && cell(t) == "caught")
        std::cout << "  " << t.target << " " << t.dtype << " " << t.kind << ": "
                  << (t.caught_by.empty() ? "(the verdict)" : t.caught_by) << "\n";
  } else {
    std::cout << wrap_lines(top_catchers(trials)) << "\n";
  }
  for (const auto& t : trials) {
    const std::string c = cell(t);
    if (c == "ESCAPED" || c.rfind("ERR", 0) == 0 || (t.kind.empty() && c != "PASS"))
      std::cout << "  " << (t.kind.empty() ? "clean run " : "") << c << ": " << t.command << "\n";
  }
  std::cout << (ok ? "PASS" : "FAIL") << " power: " << caught << " of " << caught + escaped << " planted faults caught ("
            << format_number(score, "%.1f") << "%), " << escaped << " escaped, " << not_applicable << " not applicable"
            << (broken ? ", " + std::to_string(broken) + " runs failed clean or erred" : "") << "\n";
  return ok ? 0 : 1;
}

}  // namespace

Command add_power_command(CLI::App& app) {
  auto o = std::make_shared<PowerOptions>();
  auto* c = app.add_subcommand("power", "measure the harness's power: run lessons and case files with each planted "
                                        "fault (--inject) and report which check caught it and every escape");
  c->add_option("--lesson", o->lessons,
                "a lesson to run, by number, or all (repeat; default: every lesson when no case file is named)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  c->add_option("cases", o->cases, "case files to run as well (in each --dtype, shardlab run --dtype)");
  c->add_option("--dtype", o->dtypes, "element types for the lessons and cases (repeat; default: all three)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  c->add_option("--kinds", o->kinds, "faults to plant (default: all; perturb at 1.1 x the power each clean run claims)")->delimiter(',');
  c->add_option("--replay", o->replay,
                "bfloat16: each run against its replay, bit for bit (on, default); off: what the rounding bound "
                "against the unsharded reference catches alone")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  c->add_flag("--list", o->list, "name the check that caught every run");
  c->add_flag("--json", o->json, "print one JSON object instead of the text");
  return {c, [o] { return power(*o); }};
}

}  // namespace shardlab
