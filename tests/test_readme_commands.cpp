// README.md: every command it prints runs as printed from the repository's top folder, and its
// flags are ones the program's --help lists (tests/doc_commands.hpp says how commands are found and
// run). The few commands not run are listed below, each with its reason.
#include <doctest/doctest.h>

#include <vector>

#include "tests/doc_commands.hpp"

using namespace shardlab::testing;

TEST_CASE("readme: every command README.md shows runs as printed") {
  const std::vector<DocCommand> cmds = doc_commands("README.md");
  REQUIRE_MESSAGE(!cmds.empty(), "cannot read README.md (the tests run from the repository's top folder)");
  const std::vector<NotRun> not_run = {
  };
  // Under a sanitizer these take 15-55 s each; the test file named runs the same command sanitized.
  const std::vector<NotRun> long_sanitized = {
      {"build/bin/shardlab power ", "tests/test_cmd_power.cpp", true},
      {"build/bin/shardlab check ", "tests/test_cmd_check.cpp", true},
  };
  const DocRunCounts n = run_doc_commands(cmds, not_run, long_sanitized, true);
  CHECK(n.found >= 6);
  CHECK(n.ran + n.not_run == n.flags_checked);
}
