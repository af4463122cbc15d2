// docs/*.md: every command the pages print is checked as README.md's are (tests/doc_commands.hpp):
// its flags against the program's --help, and then it runs as printed, in the pages' order, unless
// listed below with its reason. A sanitized build checks the flags only: the normal build runs the
// commands, and each subcommand's own test file runs it sanitized.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/doc_commands.hpp"

using namespace shardlab::testing;

TEST_CASE("docs: every command docs/*.md shows runs as printed") {
  std::vector<std::string> pages;
  for (const auto& e : std::filesystem::directory_iterator("docs"))
    if (e.path().extension() == ".md") pages.push_back(e.path().string());
  std::sort(pages.begin(), pages.end());
  REQUIRE_MESSAGE(pages.size() >= 8, "docs/ holds " << pages.size() << " pages (the tests run from the repository's top folder)");
  std::vector<DocCommand> cmds;
  for (const std::string& p : pages) {
    const std::vector<DocCommand> c = doc_commands(p);
    cmds.insert(cmds.end(), c.begin(), c.end());
  }
  const std::vector<NotRun> not_run = {
      {"", "a timed measurement of seconds to minutes, kept for its figures; the tests of each benchmark run it small",
       true, "docs/performance.md"},
      {"mpiexec -n 3 build/bin/shardlab bench collectives --backend mpi --ops all_reduce --min 16M --max 16M --iters 400 "
       "--collective-timeout 2",
       "the fault demo: it needs a rank stopped by hand (tests/mpi/fault_test.sh does that); unstopped it runs ~35 s"},
      {"OPENBLAS_NUM_THREADS=1 mpiexec -f hosts -n 8 build/bin/02_reduction_allreduce --backend mpi",
       "needs a Hydra hosts file naming other machines; the same run without -f hosts is shown and run before it"},
      {"build/bin/shardlab check harness/cases --junit /tmp/junit.xml",
       "make test-cases runs every shipped case file the same way"},
  };
  const DocRunCounts n = run_doc_commands(cmds, not_run, {}, false);
  CHECK(n.found >= 40);
  CHECK(n.ran + n.not_run == n.flags_checked);
  if (!kSanitized) CHECK(n.ran >= 30);
}

// docs/cli.md against the programs: a section "### `<command>`" for every command shardlab --help
// lists, naming every option that command's --help lists; and docs/lessons.md names every lesson.
TEST_CASE("docs: cli.md names every command and every option --help lists") {
  const std::string page = read_text("docs/cli.md");
  REQUIRE_MESSAGE(!page.empty(), "cannot read docs/cli.md");
  const std::vector<std::string> commands = shardlab_commands();
  CHECK(commands.size() >= 19);
  for (const std::string& c : commands) {
    CAPTURE(c);
    const std::string heading = "### `" + c + "`";
    const auto at = page.find(heading + "\n");
    CHECK_MESSAGE(at != std::string::npos, "docs/cli.md has no section " << heading);
    if (at == std::string::npos) continue;
    const auto end = page.find("\n### ", at + heading.size());
    const std::string section = page.substr(at, end == std::string::npos ? std::string::npos : end - at);
    const Ran help = run_line(bin_dir() + "/shardlab " + c + " --help");
    REQUIRE(help.status == 0);
    for (const std::string& option : listed_options(help.out))
      if (option != "--help") CHECK_MESSAGE(section.find("`" + option + "`") != std::string::npos,
                                            "docs/cli.md's " << heading << " does not name " << option);
  }
  const std::string lessons = read_text("docs/lessons.md");
  for (const auto& e : std::filesystem::directory_iterator("lessons")) {
    const std::string name = e.path().stem().string();  // 04_inner_axes_match
    if (e.path().extension() != ".cpp") continue;
    CAPTURE(name);
    CHECK(lessons.find(name.substr(0, 2) + " `" + name.substr(3) + "`") != std::string::npos);
  }
}
