#include "harness/cli/cmd_power.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
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

void run_trial(Trial& t) {
  FILE* p = ::popen((t.command + " 2>/dev/null").c_str(), "r");
  if (!p) throw Error(ErrorKind::io, "cannot start " + t.command);
  std::string out;
  char buf[65536];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int raw = ::pclose(p);
  t.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + (WIFSIGNALED(raw) ? WTERMSIG(raw) : 0);
  const auto j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return;
  t.struck = j.value("injected_struck", 0) == 1;
  if (j.contains("checks"))
    for (const auto& c : j["checks"])
      if (!c.value("pass", true)) {
        t.caught_by = c.value("name", "");
        break;
      }
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

int power(const PowerOptions& o) {
  const auto binaries = lesson_binaries();
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
  for (const auto& c : o.cases)
    if (!std::filesystem::is_regular_file(c)) throw Error(ErrorKind::io, "case file " + c + " is not a readable file");
  std::vector<std::string> dtypes = o.dtypes.empty() ? std::vector<std::string>{"float64", "float32", "bfloat16"} : o.dtypes;
  for (const auto& d : dtypes) parse_dtype(d);
  std::vector<std::string> kinds = o.kinds;
  if (kinds.empty())
    for (const auto& k : fault_kinds(1.0)) kinds.push_back(k.rfind("perturb", 0) == 0 ? "perturb" : k);
  for (const auto& k : kinds)
    if (k != "perturb") parse_fault(k);

  const std::string self = quoted((bin_dir() / "shardlab").string());
  std::vector<Trial> trials;
  const std::string replay = o.replay == "off" ? " --replay off" : "";
  auto add = [&](const std::string& target, std::string base, const std::string& dtype, DType floor_type) {
    base += replay;
    trials.push_back({target, dtype, "", base + " --json", -1, false, ""});
    for (const auto& k : kinds) {
      char e[32];
      std::snprintf(e, sizeof e, "perturb:%g", power_floor(floor_type));
      const std::string fault = k == "perturb" ? e : k;
      trials.push_back({target, dtype, fault, base + " --json --inject " + fault, -1, false, ""});
    }
  };
  for (const auto& l : lessons)
    for (const auto& d : dtypes)
      add(binaries.at(l), quoted((bin_dir() / binaries.at(l)).string()) + " --dtype " + d, d, parse_dtype(d));
  for (const auto& c : o.cases)
    for (const auto& d : dtypes)
      add(std::filesystem::path(c).stem().string(), self + " run " + quoted(c) + " --dtype " + d, d, parse_dtype(d));

  {
    if (!o.json) progress::enable("shardlab power", true);
    progress::Phase shown(std::to_string(trials.size()) + " runs", 0, static_cast<double>(trials.size()));
    std::atomic<std::size_t> next{0}, done{0};
    auto worker = [&] {
      for (std::size_t i; (i = next++) < trials.size();) {
        run_trial(trials[i]);
        shown.advance(static_cast<double>(++done));
      }
    };
    std::vector<std::thread> pool;
    const unsigned workers = std::max(1u, std::min(2u, std::thread::hardware_concurrency()));
    for (unsigned w = 0; w < workers; ++w) pool.emplace_back(worker);
    for (auto& t : pool) t.join();
  }

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
  std::cout << "shardlab power: each run clean, then with one fault planted in the sharded path (--inject;\n"
               "perturb at the element type's power floor). caught: the verdict turned FAIL; ESCAPED: planted\n"
               "and passed; -: the fault found no place in the run.\n\n"
            << table.text() << "\n";
  if (o.list) {
    std::cout << "Which check caught each:\n";
    for (const auto& t : trials)
      if (!t.kind.empty() && cell(t) == "caught")
        std::cout << "  " << t.target << " " << t.dtype << " " << t.kind << ": "
                  << (t.caught_by.empty() ? "(the verdict)" : t.caught_by) << "\n";
  } else {
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
    std::cout << wrap_lines(most) << "\n";
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
  c->add_option("--kinds", o->kinds, "faults to plant (default: all; perturb is at each type's floor)")->delimiter(',');
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
