// harness/cli/cmd_exercise.cpp: `shardlab exercise` as a learner meets it: a wrong answer is graded
// wrong with the right one and its rule, a right one right (exit 0), answers typed on stdin are
// read one per line, --json holds the question but not the answer, and bad input is one sentence.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "tests/run_binary.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

namespace {
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
int widest(const std::string& text) {
  std::istringstream in(text);
  int w = 0;
  for (std::string line; std::getline(in, line);) w = std::max(w, static_cast<int>(line.size()));
  return w;
}
}  // namespace

TEST_CASE("shardlab exercise --lesson 04 --seed 1: wrong graded wrong with the rule, right graded right") {
  auto r = run_binary("shardlab exercise --lesson 04 --seed 1 --answer 'all_reduce C over Y 192'");
  CHECK(r.status == 1);
  CHECK(has(r.out, "Exercise 04.2 (lesson 04)"));
  CHECK(has(r.out, "C[I, N_Y]  wanted, spec _,Y"));
  CHECK(has(r.out, "wrong op: it is reduce_scatter C over Y 192"));
  CHECK(has(r.out, "why:   sum the partial products over Y, each device keeping its slice of dim n"));
  CHECK(has(r.out, "bytes: (n-1)/n x 256 B block, n = 4"));
  CHECK(has(r.out, "FAIL exercise 04.2: 0 of 1 right"));
  CHECK(widest(r.out) <= 100);
  r = run_binary("shardlab exercise --lesson 04 --seed 1 --answer 'reduce_scatter C over Y 192'");
  CHECK(r.status == 0);
  CHECK(has(r.out, "PASS exercise 04.2: 1 of 1 right"));
}

TEST_CASE("shardlab exercise: answers typed one per line on stdin, an empty line ends") {
  const std::string file = "/tmp/shardlab_exercise_answer_" + std::to_string(::getpid());
  {
    std::ofstream f(file);
    f << "all_gather A over X 256\nall_gather B over Y 384\n\nignored after the empty line\n";
  }
  auto r = run_binary("shardlab exercise --lesson 05 --seed 0 < " + file);
  CHECK(r.status == 0);
  CHECK(has(r.out, "PASS exercise 05.1: 2 of 2 right"));
  {
    std::ofstream f(file);
    f << "all_gather A over X 256\nthis is not an answer\n";
  }
  r = run_binary("shardlab exercise --lesson 05 --seed 0 < " + file);  // a pipe, not a terminal: bad input
  CHECK(r.status == 2);
  CHECK(count_lines(r.err) == 1);
  CHECK(has(r.err, "'this is not an answer' is not understood"));
  for (const char* empty : {"", "\n", "   \n\n"}) {  // EOF, an empty line, blanks: no answer, not "none"
    {
      std::ofstream f(file);
      f << empty;
    }
    r = run_binary("shardlab exercise --lesson 11 --seed 0 < " + file);
    CHECK(r.status == 1);
    CHECK(has(r.out, "No answer given (an empty line or the end of input first): graded as none."));
    CHECK(has(r.out, "FAIL exercise 11.1"));
  }
  for (std::string lesson : {"01", "11", "12", "13", "14", "16", "17", "19", "20"}) {  // "none" fails every lesson's first case
    r = run_binary("shardlab exercise --lesson " + lesson + " --answer none");
    CHECK_MESSAGE(r.status == 1, lesson);
  }
  std::remove(file.c_str());
}

TEST_CASE("shardlab exercise --json: the question without its answer") {
  const auto r = run_binary("shardlab exercise --lesson 08 --seed 0 --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["id"] == "08.1");
  CHECK(j["mesh"] == "X=2,Y=4");
  CHECK(j["a"]["name"] == "x");
  CHECK(j["a"]["spec"] == "X,Y");
  CHECK(j["b"]["shape"] == nlohmann::json::array({16, 32}));
  CHECK_FALSE(has(r.out, "all_gather"));
  CHECK_FALSE(has(r.out, "192"));
}

TEST_CASE("shardlab exercise: every lesson's first exercise fits 100 columns; --list names them") {
  for (const char* l : {"01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "11", "12", "13", "14", "15", "16",
                        "17", "18", "19", "20"}) {
    CAPTURE(l);
    const auto r = run_binary(std::string("shardlab exercise --answer none --lesson ") + l);
    CHECK((r.status == 0 || r.status == 1));
    CHECK(widest(r.out) <= 100);
  }
  const auto r = run_binary("shardlab exercise --list");
  CHECK(r.status == 0);
  CHECK(has(r.out, "      17          3"));
}

TEST_CASE("shardlab exercise: bad values are one sentence and exit 2") {
  for (const char* args : {"--lesson 22", "--lesson 99", "--lesson ''", "--seed -1", "--answer 'bogus'",
                           "--answer 'all_reduce C over Y many'", "--json --answer none", "--seed 1e3"}) {
    CAPTURE(args);
    const auto r = run_binary(std::string("shardlab exercise ") + args);
    CHECK(r.status == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.out.empty());
  }
}

TEST_CASE("shardlab exercise: stdin is read within bounds; a bad answer is quoted short and printable") {
  // /dev/zero never sends a newline: refused at the line bound, at once, in little memory.
  const auto zero = run_binary("shardlab exercise --lesson 04 < /dev/zero");
  CHECK(zero.status == 2);
  CHECK(count_lines(zero.err) == 1);
  CHECK(zero.err.find("longer than 4096 bytes") != std::string::npos);
  CHECK(zero.err.size() < 200);
  // An answer with a terminal escape and half a UTF-8 character: one sentence, nothing raw echoed.
  const std::string path = "/tmp/shardlab_exercise_escape_" + std::to_string(::getpid());
  {
    std::ofstream f(path, std::ios::binary);
    f << "all_reduce \x1b[31mC\xc3 over Y 12\n";
  }
  const auto bad = run_binary("shardlab exercise --lesson 04 < " + path);
  std::remove(path.c_str());
  CHECK(bad.status == 2);
  CHECK(count_lines(bad.err) == 1);
  CHECK(bad.err.find('\x1b') == std::string::npos);
  CHECK(bad.err.find('\xc3') == std::string::npos);
  CHECK(bad.err.find("names tensor '?[31mC?'") != std::string::npos);
}
