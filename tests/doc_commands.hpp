// The commands README.md and docs/*.md print, as the tests that run them read them
// (tests/test_readme_commands.cpp, tests/test_docs_commands.cpp).
//
// A command is a line of a ``` block that starts with build/bin/ or mpiexec, or an inline `code
// span` that starts with build/bin/ and holds a space (either after an optional "$ " prompt and
// VAR=value assignments); a block line ending in a backslash continues on the next. A block line
// starting with `error: ` right after a command says that command answers with exit 2, and a line
// `exit N` among the lines a command prints (before the next command) that it exits N.
//
// Every command is checked at least for its flags (flags_known): the program and its subcommand
// answer --help with exit 0, and every --flag the command gives is one that help lists. The tests
// then run each command as printed unless their lists say why not.
#pragma once
#include <doctest/doctest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/run_binary.hpp"
#include "tests/sanitized.hpp"

namespace shardlab::testing {

struct DocCommand {
  std::string file;          // README.md or docs/<page>.md
  std::string text;          // continuations joined, the prompt dropped
  int line = 0;              // where it starts in `file`
  int status = 0;            // the exit status the page shows (2 after an `error: ` line)
};

// `s` without its VAR=value assignments in front: what the command runs.
inline std::string program_part(const std::string& s) {
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

inline bool is_doc_command(const std::string& s) {
  const std::string p = program_part(s);
  return p.rfind("build/bin/", 0) == 0 || p.rfind("mpiexec ", 0) == 0;
}

inline std::vector<DocCommand> doc_commands(const std::string& path) {
  std::ifstream in(path);
  std::vector<DocCommand> cmds;
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
      last_end = -1;
      continue;
    }
    if (block) {
      if (!continuing) {
        if (t.rfind("$ ", 0) == 0) t = trim(t.substr(2));
        if (!is_doc_command(t)) {
          if (t.rfind("error: ", 0) == 0 && last_end == number - 1) cmds.back().status = 2;
          static const std::regex exit_line("exit ([0-9]+)");
          std::smatch m;
          if (last_end > 0 && std::regex_match(t, m, exit_line)) cmds.back().status = std::stoi(m[1]);
          continue;
        }
        pending_line = number;
      }
      continuing = !t.empty() && t.back() == '\\';
      if (continuing) t.pop_back();
      pending += trim(t) + " ";
      if (!continuing) {
        cmds.push_back({path, trim(pending), pending_line, 0});
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
        cmds.push_back({path, span, number, 0});
      a = line.find('`', b + 1);
    }
  }
  return cmds;
}

// The words of `text` up to a shell comment, pipe or redirection, the environment and an mpiexec
// launcher dropped: "build/bin/shardlab", "bench", "collectives", "--max", "1M", ...
inline std::vector<std::string> command_words(const std::string& text) {
  std::istringstream in(program_part(text));
  std::vector<std::string> words;
  bool started = false;
  for (std::string w; in >> w;) {
    if (w[0] == '#' || w == "|" || w == "&&" || w == "||" || w[0] == '>' || w[0] == '<' || w == "2>&1") break;
    if (!started && w.rfind("build/bin/", 0) != 0) continue;  // mpiexec and its own flags
    started = true;
    const bool last = w.back() == ';';
    if (last) w.pop_back();
    words.push_back(w);
    if (last) break;
  }
  return words;
}

// What --help is asked of: the program and, for shardlab, its command (two words for bench).
inline std::string help_target(const std::vector<std::string>& words) {
  if (words.empty()) return "";
  std::string target = words[0];
  if (target != "build/bin/shardlab") return target;
  static const std::regex sub("[a-z][a-z-]*");
  for (std::size_t i = 1; i < words.size() && i <= 2; ++i) {
    if (!std::regex_match(words[i], sub)) break;
    target += " " + words[i];
    if (words[i] != "bench") break;
  }
  return target;
}

// Every --flag `help` names.
inline std::set<std::string> help_flags(const std::string& help) {
  static const std::regex flag("--[a-z][a-z0-9-]*");
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(help.begin(), help.end(), flag); it != std::sregex_iterator(); ++it)
    out.insert(it->str());
  return out;
}

// The flags check: "" when the program (and command) answer --help with exit 0 and list every --flag
// the command gives; else what is wrong. `bin` replaces build/bin/ (the binaries under test).
inline std::string flags_known(const std::string& text, const std::string& bin) {
  const std::vector<std::string> words = command_words(text);
  const std::string target = help_target(words);
  if (target.empty()) return "no build/bin/ program in it";
  std::string run = target;
  run.replace(0, std::string("build/bin").size(), bin);
  const Ran help = run_line("timeout -k 5 30 " + run + " --help </dev/null");
  if (help.status != 0) return target + " --help exits " + std::to_string(help.status);
  const std::set<std::string> known = help_flags(help.out);
  std::string unknown;
  for (const std::string& w : words) {
    if (w.rfind("--", 0) != 0 || w.size() < 3) continue;
    const std::string name = w.substr(0, w.find('='));
    if (!known.count(name)) unknown += (unknown.empty() ? "" : ", ") + name;
  }
  return unknown.empty() ? "" : target + " --help does not list " + unknown;
}

// A command the tests do not run as printed, and why (its flags are still checked).
struct NotRun {
  const char* command;  // exactly as extracted (continuations joined, the prompt dropped), or a prefix
  const char* why;
  bool prefix = false;         // true: every command starting with `command` ("": every command)
  const char* file = nullptr;  // only the commands of this page
};

struct DocRunCounts {
  int found = 0;          // commands on the pages
  int flags_checked = 0;  // their --help asked and every flag found in it
  int ran = 0;            // run as printed
  int ran_mpi = 0;        // of those, under mpiexec
  int not_run = 0;        // listed, long under a sanitizer, no mpiexec, or reading what such a command writes
};

inline std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::set<std::string> top_level_entries() {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(".")) names.insert(e.path().filename().string());
  return names;
}

// Every command of `cmds` has its flags checked, and runs as printed from the repository's top
// folder unless `not_run` names it (or, under a sanitizer, `long_sanitized` names its prefix, or
// `run_sanitized` is false). Each runs through sh -c with the binaries under test and must exit 0;
// `shardlab exercise` given no answer 0 or 1; one shown exiting otherwise, as shown. They run
// in the pages' order, each once; whatever they write must go under /tmp/, which points at a
// directory of the test's own, removed afterwards. Every `not_run` entry must match a command.
inline DocRunCounts run_doc_commands(const std::vector<DocCommand>& cmds, const std::vector<NotRun>& not_run,
                                     const std::vector<NotRun>& long_sanitized, bool run_sanitized) {
  DocRunCounts n;
  char dir_template[] = "/tmp/shardlab_docs_XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string tmp = dir_template;
  // Sanitized binaries under MPICH's busy-polling ranks would only repeat, many times slower, what
  // the normal build's run and make test's MPI suite already check.
  const bool have_mpiexec = !kSanitized && std::system("command -v mpiexec >/dev/null 2>&1") == 0;
  const std::set<std::string> before = top_level_entries();
  std::set<std::string> used, done;
  // /tmp/ paths named by a command that was not run, and where: a later command naming one reads
  // what that command would have written, so it is not run either.
  std::vector<std::pair<std::string, std::string>> unwritten;
  auto note_unwritten = [&](const DocCommand& c) {
    std::istringstream words(c.text);
    for (std::string w; words >> w;)
      if (w.rfind("/tmp/", 0) == 0) unwritten.emplace_back(w, c.file + ":" + std::to_string(c.line));
  };
  auto matches = [](const NotRun& s, const DocCommand& c) {
    if (s.file && c.file != s.file) return false;
    return s.prefix ? program_part(c.text).rfind(s.command, 0) == 0 : c.text == s.command;
  };
  for (const DocCommand& c : cmds) {
    ++n.found;
    const std::string where = c.file + ":" + std::to_string(c.line);
    CAPTURE(where);
    CAPTURE(c.text);
    if (done.count(c.text)) continue;  // shown twice, checked and run once
    const std::string flags = flags_known(c.text, bin_dir());
    CHECK_MESSAGE(flags.empty(), where << ": " << flags);
    ++n.flags_checked;
    std::string skip;
    for (const auto& s : not_run)
      if (skip.empty() && matches(s, c)) {
        skip = s.why;
        used.insert(std::string(s.file ? s.file : "") + "|" + s.command);
      }
    if (skip.empty() && kSanitized && !run_sanitized) skip = "a sanitized build runs these pages' commands' flags only";
    if (skip.empty() && kSanitized)
      for (const auto& s : long_sanitized)
        if (skip.empty() && matches(s, c)) skip = std::string("long under a sanitizer; ") + s.why + " runs it";
    for (const auto& [path, at] : unwritten)
      if (skip.empty() && c.text.find(path) != std::string::npos)
        skip = "it reads " + path + ", which " + at + " writes and which was not run";
    const bool mpi = program_part(c.text).rfind("mpiexec ", 0) == 0;
    if (skip.empty() && mpi && !have_mpiexec) skip = "no mpiexec here, or a sanitized build";
    done.insert(c.text);
    if (!skip.empty()) {
      MESSAGE(where << " not run: " << skip);
      note_unwritten(c);
      ++n.not_run;
      continue;
    }
    // Outputs go under /tmp/ only (the test moves /tmp/ into its own directory).
    std::istringstream words(c.text);
    for (std::string w, prev; words >> w; prev = w)
      if (prev == "--out" || prev == "--trace" || prev == "--junit" || prev == "--csv")
        CHECK(w.rfind("/tmp/", 0) == 0);
    if (c.text.find("shardlab sweep") != std::string::npos)  // its --out defaults to build/plots
      CHECK(c.text.find("--out /tmp/") != std::string::npos);
    std::string cmd = replace_all(c.text, "/tmp/", tmp + "/");
    if (bin_dir() != "build/bin") cmd = replace_all(cmd, "build/bin/", bin_dir() + "/");
    const std::string err = tmp + "/.stderr";
    const int status = shell_status(cmd, 120, "</dev/null >/dev/null 2>" + err);
    const std::string stderr_text = read_text(err);
    CAPTURE(stderr_text);
    if (c.text.find("shardlab exercise") != std::string::npos)
      CHECK((status == 0 || status == 1));  // no answers given: graded all wrong
    else
      CHECK(status == c.status);
    ++n.ran;
    n.ran_mpi += mpi;
  }
  for (const auto& s : not_run) {  // a stale entry would hide nothing and mislead
    const std::string listed = std::string(s.file ? s.file : "") + "|" + s.command;
    CAPTURE(listed);
    CHECK(used.count(listed) == 1);
  }
  CHECK(top_level_entries() == before);  // nothing written into the repository's top folder
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
  MESSAGE(n.found << " commands: " << n.flags_checked << " flag-checked, " << n.ran << " run (" << n.ran_mpi
                  << " under mpiexec), " << n.not_run << " not run");
  return n;
}

}  // namespace shardlab::testing

namespace shardlab::testing {

// The options a --help text lists (its lines "  --name ..." or "  -h,--help ..."), not the flags
// its descriptions mention.
inline std::set<std::string> listed_options(const std::string& help) {
  static const std::regex option("^  (?:-[a-zA-Z],)?(--[a-z][a-z0-9-]*)");
  std::set<std::string> out;
  std::istringstream in(help);
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, option)) out.insert(m[1]);
  return out;
}

// The subcommands a --help text lists under "Subcommands:".
inline std::vector<std::string> listed_subcommands(const std::string& help) {
  static const std::regex sub("^  ([a-z][a-z-]*)( |$)");
  std::vector<std::string> out;
  const auto at = help.find("Subcommands:");
  if (at == std::string::npos) return out;
  std::istringstream in(help.substr(at));
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, sub)) out.push_back(m[1]);
  return out;
}

// Every shardlab command, "bench" expanded into its own: "matmul", "bench collectives", ...
inline std::vector<std::string> shardlab_commands() {
  std::vector<std::string> out;
  const std::string shardlab = bin_dir() + "/shardlab";
  for (const std::string& c : listed_subcommands(run_line(shardlab + " --help").out)) {
    if (c != "bench") {
      out.push_back(c);
      continue;
    }
    for (const std::string& b : listed_subcommands(run_line(shardlab + " bench --help").out)) out.push_back("bench " + b);
  }
  return out;
}

}  // namespace shardlab::testing
