// README.md: every command it shows runs as printed from the repository's top folder (issue 18).
// A command is a line of a ``` block that starts with build/bin/ or mpiexec, or an inline `code
// span` that starts with build/bin/ (either after an optional "$ " prompt and VAR=value
// assignments); a block line ending in a backslash continues on the next. Each runs through
// sh -c with the binaries under test ($SHARDLAB_BIN for build/bin/) and must exit 0;
// `shardlab exercise` given no answer 0 or 1; a command the README shows followed by an `error: `
// line exits 2, as it says. Commands run in the README's order (one may read what an earlier one
// wrote), each once. Whatever they write must go under /tmp/, which the test points at a
// directory of its own and removes afterwards, so nothing lands in the repository or in the real
// /tmp. The few commands that are not run are listed in kSkipped, each with its reason.
#include <doctest/doctest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/run_binary.hpp"
#include "tests/sanitized.hpp"

using shardlab::testing::bin_dir;
using shardlab::testing::shell_status;
using shardlab::testing::trim;

namespace {

struct Skipped {
  const char* command;  // exactly as extracted (continuations joined, the prompt dropped)
  const char* why;
};

const Skipped kSkipped[] = {
    {"mpiexec -n 3 build/bin/shardlab bench collectives --backend mpi --ops all_reduce --min 16M --max 16M "
     "--iters 400 --collective-timeout 2      # rank 1 gets SIGSTOP; 2.3 s later mpiexec exits 3, no rank left",
     "the fault demo: it needs a rank stopped by hand (tests/mpi/fault_test.sh does that); "
     "unstopped it runs ~35 s"},
    {"OPENBLAS_NUM_THREADS=1 mpiexec -f hosts -n 8 build/bin/02_reduction_allreduce --backend mpi",
     "needs a Hydra hosts file naming other machines; the same run without -f hosts is shown and run before it"},
    {"OPENBLAS_NUM_THREADS=1 build/bin/shardlab bench memory",
     "a transcript of a timed run at the default size (~25 s); the command table's bench memory example runs "
     "the same benchmark small"},
    {"build/bin/shardlab exercise --lesson NN",
     "NN stands for a lesson's number; the table's exercise example runs one"},
};

// Under a sanitizer (tests/sanitized.hpp) these README examples are not run: each takes 15-55 s
// sanitized, what the README promises (that they run as printed) is the normal build's run of
// this test, and the test file named runs the same subcommand sanitized.
const Skipped kLongUnderSanitizer[] = {
    {"build/bin/shardlab soak ", "tests/test_cmd_soak.cpp"},
    {"build/bin/shardlab power ", "tests/test_cmd_power.cpp"},
    {"build/bin/shardlab sweep ", "tests/test_sweep.cpp"},
    {"build/bin/shardlab check ", "tests/test_cmd_check.cpp"},
    {"build/bin/shardlab bench plan ", "tests/test_bench_plan.cpp"},
    {"build/bin/shardlab bench memory ", "tests/test_bench_memory.cpp"},
};

struct Command {
  std::string text;
  int line = 0;              // in README.md
  bool shows_error = false;  // the README shows it answering with an `error: ` line
};

// `s` without its VAR=value assignments in front: what the command runs.
std::string program_part(const std::string& s) {
  std::string rest = s;
  for (;;) {
    const auto sp = rest.find(' '), eq = rest.find('=');
    if (sp == std::string::npos || eq == std::string::npos || eq > sp || eq == 0) return rest;
    bool name = true;
    for (std::size_t i = 0; i < eq; ++i)
      name = name && (std::isupper(static_cast<unsigned char>(rest[i])) || rest[i] == '_');
    if (!name) return rest;
    rest = trim(rest.substr(sp + 1));
  }
}

bool is_command(const std::string& s) {
  const std::string p = program_part(s);
  return p.rfind("build/bin/", 0) == 0 || p.rfind("mpiexec ", 0) == 0;
}

std::vector<Command> readme_commands(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path << " (the tests run from the repository's top folder)");
  std::vector<Command> cmds;
  std::string line, pending;
  bool block = false, continuing = false;
  int number = 0, pending_line = 0, last_end = -1;  // last_end: the last line of the last block command
  while (std::getline(in, line)) {
    ++number;
    std::string t = trim(line);
    if (t.rfind("```", 0) == 0) {
      block = !block;
      continuing = false;
      pending.clear();
      continue;
    }
    if (block) {
      if (!continuing) {
        if (t.rfind("$ ", 0) == 0) t = trim(t.substr(2));
        if (!is_command(t)) {
          if (t.rfind("error: ", 0) == 0 && last_end == number - 1) cmds.back().shows_error = true;
          continue;
        }
        pending_line = number;
      }
      continuing = !t.empty() && t.back() == '\\';
      if (continuing) t.pop_back();
      pending += trim(t) + " ";
      if (!continuing) {
        cmds.push_back({trim(pending), pending_line, false});
        pending.clear();
        last_end = number;
      }
      continue;
    }
    // Inline code spans in prose and tables that start with build/bin/; one without a space is a
    // path, not a command. Inline mpiexec spans are fragments (`mpiexec -n 2`, `mpiexec -n 8 ...`).
    for (std::size_t a = line.find('`'); a != std::string::npos;) {
      const std::size_t b = line.find('`', a + 1);
      if (b == std::string::npos) break;
      const std::string span = line.substr(a + 1, b - a - 1);
      const std::string prog = program_part(span);
      if (prog.rfind("build/bin/", 0) == 0 && prog.find(' ') != std::string::npos)
        cmds.push_back({span, number, false});
      a = line.find('`', b + 1);
    }
  }
  return cmds;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::set<std::string> top_level_entries() {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(".")) names.insert(e.path().filename().string());
  return names;
}

}  // namespace

TEST_CASE("readme: every command README.md shows runs as printed") {
  const std::vector<Command> cmds = readme_commands("README.md");
  char dir_template[] = "/tmp/shardlab_readme_XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string tmp = dir_template;
  // Sanitized binaries under MPICH's busy-polling ranks would only repeat, many times slower, what
  // the normal build's run of this test and make test's MPI suite already check.
  const bool have_mpiexec =
      !shardlab::testing::kSanitized && std::system("command -v mpiexec >/dev/null 2>&1") == 0;
  const std::set<std::string> before = top_level_entries();
  std::set<std::string> skips_used, done;
  // /tmp/ paths named by a command that was not run, and its line: a later command naming one reads
  // what that command would have written, so it is not run either.
  std::vector<std::pair<std::string, int>> unwritten;
  auto note_unwritten = [&](const Command& c) {
    std::istringstream words(c.text);
    for (std::string w; words >> w;)
      if (w.rfind("/tmp/", 0) == 0) unwritten.emplace_back(w, c.line);
  };
  int ran = 0, ran_mpi = 0, not_run = 0;  // not_run: for want of mpiexec, or what such a command writes
  for (const Command& c : cmds) {
    CAPTURE(c.line);
    CAPTURE(c.text);
    bool skip = false;
    for (const auto& s : kSkipped)
      if (c.text == s.command) {
        skip = true;
        skips_used.insert(s.command);
        MESSAGE("README.md:" << c.line << " not run: " << std::string(s.why));
      }
    if (shardlab::testing::kSanitized)
      for (const auto& s : kLongUnderSanitizer)
        if (!skip && program_part(c.text).rfind(s.command, 0) == 0) {
          skip = true;
          ++not_run;
          MESSAGE("README.md:" << c.line << " not run under a sanitizer: " << std::string(s.why) << " runs it");
        }
    for (const auto& [path, line] : unwritten)
      if (!skip && c.text.find(path) != std::string::npos) {
        skip = true;
        ++not_run;
        MESSAGE("README.md:" << c.line << " not run: it reads " << path << ", which README.md:" << line
                             << " writes and which was not run");
      }
    if (skip) {
      note_unwritten(c);
      continue;
    }
    if (!done.insert(c.text).second) continue;  // shown twice, run once
    // Outputs go under /tmp/ only (the test moves /tmp/ into its own directory).
    std::istringstream words(c.text);
    for (std::string w, prev; words >> w; prev = w)
      if (prev == "--out" || prev == "--trace" || prev == "--junit" || prev == "--csv")
        CHECK(w.rfind("/tmp/", 0) == 0);
    if (c.text.find("shardlab sweep") != std::string::npos)  // its --out defaults to build/plots
      CHECK(c.text.find("--out /tmp/") != std::string::npos);
    const bool mpi = program_part(c.text).rfind("mpiexec ", 0) == 0;
    if (mpi && !have_mpiexec) {
      MESSAGE("README.md:" << c.line << " not run: no mpiexec here, or a sanitized build");
      note_unwritten(c);
      ++not_run;
      continue;
    }
    std::string cmd = replace_all(c.text, "/tmp/", tmp + "/");
    if (bin_dir() != "build/bin") cmd = replace_all(cmd, "build/bin/", bin_dir() + "/");
    const std::string err = tmp + "/.stderr";
    const int status = shell_status(cmd, 120, "</dev/null >/dev/null 2>" + err);
    const std::string stderr_text = read_file(err);
    CAPTURE(stderr_text);
    if (c.text.find("shardlab exercise") != std::string::npos)
      CHECK((status == 0 || status == 1));  // no answers given: graded all wrong
    else if (c.shows_error)
      CHECK(status == 2);
    else
      CHECK(status == 0);
    ++ran;
    ran_mpi += mpi;
  }
  for (const auto& s : kSkipped) {  // a stale entry would hide nothing and mislead
    const std::string skipped = s.command;
    CAPTURE(skipped);
    CHECK(skips_used.count(skipped) == 1);
  }
  CHECK(ran + not_run >= 30);
  CHECK(ran >= 20);
  if (have_mpiexec) CHECK(ran_mpi >= 6);
  CHECK(top_level_entries() == before);  // nothing written into the repository's top folder
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
}
