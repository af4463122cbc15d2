// README.md: every command it prints runs as printed from the repository's top folder, and its
// flags are ones the program's --help lists (tests/doc_commands.hpp says how commands are found and
// run).
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/doc_commands.hpp"

using namespace shardlab::testing;

TEST_CASE("readme: every command README.md shows runs as printed") {
  const std::vector<DocCommand> cmds = doc_commands("README.md");
  REQUIRE_MESSAGE(!cmds.empty(), "cannot read README.md (the tests run from the repository's top folder)");
  // The README's commands are the tour's and each runs in well under a second, so all of them run,
  // sanitized builds included.
  const DocRunCounts n = run_doc_commands(cmds, {}, {}, true);
  CHECK(n.found >= 5);
  CHECK(n.ran + n.not_run == n.flags_checked);
}

// The README's tables: a row for every lesson (`NN_name` in its first cell) and every shardlab
// command (`name`), as the programs list them.
TEST_CASE("readme: every lesson and every shardlab command has a row") {
  const std::string readme = read_text("README.md");
  int lessons = 0;
  for (const auto& e : std::filesystem::directory_iterator("lessons")) {
    if (e.path().extension() != ".cpp") continue;
    const std::string row = "| `" + e.path().stem().string() + "` |";
    CAPTURE(row);
    CHECK(readme.find(row) != std::string::npos);
    ++lessons;
  }
  CHECK(lessons == 21);
  const std::vector<std::string> commands = shardlab_commands();
  CHECK(commands.size() >= 19);
  for (const std::string& c : commands) {
    const std::string row = "| `" + c + "` |";
    CAPTURE(row);
    CHECK(readme.find(row) != std::string::npos);
  }
  int lines = 0;
  for (char ch : readme) lines += ch == '\n';
  CHECK(lines <= 200);
}
