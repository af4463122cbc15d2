// harness/cli/cli.cpp's rules on every command `shardlab --help` lists (subcommands too) and every
// lesson, found from the help texts so that a new command or flag is covered without being named
// here: one syntax for every number (refuse_bad_values, number_syntax: decimal, no leading zeros,
// no hex), and standard output that cannot be written is exit 3 with one line (checked_stdout).
#include <doctest/doctest.h>

#include <dirent.h>

#include <algorithm>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/run_binary.hpp"

using shardlab::testing::bin_dir;
using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

namespace {

// The names in a help text's "Subcommands:" section.
std::vector<std::string> subcommands(const std::string& help) {
  std::vector<std::string> out;
  std::istringstream in(help);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line == "Subcommands:") inside = true;
    else if (inside && line.empty()) inside = false;
    else if (inside && line.size() > 2 && line[0] == ' ' && line[2] != ' ') out.push_back(line.substr(2, line.find(' ', 2) - 2));
  }
  return out;
}

// Every command line of shardlab that runs something: "cost", "bench collectives", ...
std::vector<std::string> commands() {
  std::vector<std::string> out;
  for (const std::string& c : subcommands(run_binary("shardlab --help").out)) {
    const std::vector<std::string> subs = subcommands(run_binary("shardlab " + c + " --help").out);
    if (subs.empty()) out.push_back(c);
    for (const std::string& s : subs) out.push_back(c + " " + s);
  }
  return out;
}

std::vector<std::string> lessons() {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(bin_dir().c_str())) {
    while (const dirent* e = ::readdir(d))
      if (std::regex_match(e->d_name, std::regex("[0-9][0-9]_[a-z0-9_]+"))) out.push_back(e->d_name);
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The options whose value is a number, by the type their help line names: {"--iters", "INT"}.
std::vector<std::pair<std::string, std::string>> number_options(const std::string& help) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::regex line(R"(^\s+(?:-[a-zA-Z],)?(--[a-z0-9-]+) (INT|UINT|FLOAT|SECONDS)\b)");
  std::istringstream in(help);
  std::string text;
  std::smatch m;
  while (std::getline(in, text))
    if (std::regex_search(text, m, line)) out.push_back({m[1], m[2]});
  return out;
}

// What a command needs besides the flag under test to get past its own required values.
const std::map<std::string, std::string> kRequired = {
    {"run", "harness/cases/column_ffn.toml"},
    {"check", "harness/cases/column_ffn.toml"},
    {"zero", "--params 1000"},
    {"matmul", "--a-spec _,_ --b-spec _,_"},
    {"einsum", "bsm,mh-\\>bsh --specs _,_,_ _,_"},
};

std::string required(const std::string& command) {
  const auto it = kRequired.find(command);
  return it == kRequired.end() ? "" : " " + it->second;
}

// A number written other than in plain decimal is refused by name, one line, nothing run.
void refuses_odd_numbers(const std::string& program, const std::string& extra) {
  const auto options = number_options(run_binary(program + " --help").out);
  for (const auto& [flag, type] : options) {
    for (const std::string value : {type == "FLOAT" || type == "SECONDS" ? "0x10" : "010", "1e999"}) {
      if (value == std::string("1e999") && type != "FLOAT") continue;
      const std::string line = program + extra + " " + flag + " " + value;
      CAPTURE(line);
      const auto r = run_binary(line);
      CHECK(r.status == 2);
      CHECK(count_lines(r.err) == 1);
      CHECK(r.err.find(flag) != std::string::npos);
      CHECK(r.out.empty());
    }
  }
}

}  // namespace

TEST_CASE("cli: every number flag of every command and lesson takes plain decimal only") {
  const std::vector<std::string> all = commands();
  REQUIRE(all.size() >= 20);  // the commands and bench's subcommands
  int flags = 0;
  for (const std::string& c : all) {
    refuses_odd_numbers("shardlab " + c, required(c));
    flags += static_cast<int>(number_options(run_binary("shardlab " + c + " --help").out).size());
  }
  for (const std::string& lesson : lessons()) refuses_odd_numbers(lesson, "");
  CHECK(flags >= 40);  // the help texts were read: their typed options were found
  REQUIRE(lessons().size() == 21);
}

TEST_CASE("cli: numbers inside text values follow the same rule") {
  for (const std::string line :
       {"shardlab moe --capacity-factor 0x10", "shardlab ring-attention --tokens 0x20000",
        "shardlab ring-attention --inject perturb:0x1p-3", "shardlab pipeline --collective-timeout 0x10",
        "shardlab pipeline --mesh X=010", "20_expert_parallel --capacity-factor 0x10",
        "20_expert_parallel --capacity-factor inf", "11_propagation --dims b=08,s=4,m=16,h=64",
        "shardlab zero --params 0x1000", "shardlab bench collectives --max 010K"}) {
    CAPTURE(line);
    const auto r = run_binary(line);
    CHECK(r.status == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.out.empty());
  }
}

TEST_CASE("cli: a value given is never taken as not given, and two that cannot both hold are refused") {
  for (const std::string line :
       {"shardlab pipeline --batch 0", "shardlab pipeline --batch 8 --micro-batch 3",
        "11_propagation --dims b=8,s=4,m=16,h=64,z=2"}) {
    CAPTURE(line);
    const auto r = run_binary(line);
    CHECK(r.status == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.out.empty());
  }
  CHECK(run_binary("shardlab pipeline --batch 8 --quiet").status == 0);
}

TEST_CASE("cli: standard output that cannot be written is exit 3 with one line, on every command") {
  // A cheap run of each command that prints a report; a command added without one here fails.
  const std::map<std::string, std::string> cheap = {
      {"version", ""},
      {"bench collectives", "--min 8 --max 64 --iters 1 --warmup 0"},
      {"bench memory", "--strategies gspmd --dims B=2,S=2,M=8,H=16 --iters 1"},
      {"bench ffn", "--help"},  // its shortest run measures the machine for seconds; its help is cheap
      {"bench plan", "--cases 1"},
      {"cost", ""},
      {"ffn", ""},
      {"matmul", "--a-spec X,_ --b-spec _,_ --mesh X=2 --shape 4,4,4"},
      {"einsum", "bsm,mh-\\>bsh --specs _,_,_ _,_ --dims b=2,s=2,m=4,h=4"},
      {"sweep", "--what zero --out /tmp/shardlab_test_cli_sweep"},
      {"run", "harness/cases/column_ffn.toml"},
      {"check", "harness/cases/column_ffn.toml"},
      {"zero", "--params 1000 --devices 4"},
      {"pipeline", ""},
      {"plan-model", "--print-model gpt3-175b"},
      {"soak", "--cases 1"},
      {"exercise", "--list"},
      {"power", "--lesson 02 --dtype float64 --kinds skip-add"},
      {"moe", "--json"},
      {"adam", "--json"},
      {"nested", "--json"},
      {"ring-attention", "--json"},
  };
  for (const std::string& c : commands()) {
    CAPTURE(c);
    const auto it = cheap.find(c);
    REQUIRE_MESSAGE(it != cheap.end(), "give command '" << c << "' a cheap run in this test");
    // Exit 3, not 0 (output lost) and not 2 (the cheap run's flags gone stale).
    for (const std::string target : {" >/dev/full", " >&-"}) {
      const auto r = run_binary("shardlab " + c + " " + it->second + target);
      CAPTURE(target);
      CHECK(r.status == 3);
      CHECK(count_lines(r.err) == 1);
      CHECK(r.err.find("standard output could not be written") != std::string::npos);
    }
    CHECK(run_binary("shardlab " + c + " --help >/dev/full").status == 3);
  }
  CHECK(run_binary("shardlab --help >/dev/full").status == 3);
  for (const std::string& lesson : lessons()) {
    CAPTURE(lesson);
    CHECK(run_binary(lesson + " --help >/dev/full").status == 3);
  }
  shardlab::testing::run_line("rm -rf /tmp/shardlab_test_cli_sweep");
  const auto lesson = run_binary("02_reduction_allreduce --quiet >/dev/full");
  CHECK(lesson.status == 3);
  CHECK(count_lines(lesson.err) == 1);
}
