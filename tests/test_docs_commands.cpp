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
  };
  const DocRunCounts n = run_doc_commands(cmds, not_run, {}, false);
  CHECK(n.found >= 40);
  CHECK(n.ran + n.not_run == n.flags_checked);
  if (!kSanitized) CHECK(n.ran >= 30);
}
