// harness/models/exercise.cpp: the bank covers the lessons, every case's plan is what the sim
// run's ledger measured, the bytes are the ring formulas worked by hand, and grading tells a right
// answer from each kind of wrong one.
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "core/error.hpp"
#include "core/mesh.hpp"
#include "harness/models/exercise.hpp"

using namespace shardlab;

namespace {

// Bytes one device sends in a ring collective over a group of n, from its block (the formulas of
// article 000, written here apart from the planner's and the ledger's code).
std::size_t ring_bytes(const std::string& op, int n, std::size_t block) {
  if (op == "all_gather") return (n - 1) * block;
  if (op == "all_reduce" || op == "all_reduce_max") return 2 * (n - 1) * block / n;
  return (n - 1) * block / n;  // reduce_scatter, all_to_all
}

const AnswerItem& only(const Solution& s) {
  REQUIRE(s.right.size() == 1);
  return s.right[0];
}

}  // namespace

TEST_CASE("exercises: every lesson but 21 has at least 2, lesson 01's and 16's by numbers") {
  CHECK(exercise_bank().size() >= 40);
  for (int l = 1; l <= 20; ++l) {
    const std::string name = (l < 10 ? "0" : "") + std::to_string(l);
    CHECK_MESSAGE(exercise_count(name) >= 2, name);
  }
  // Lesson 01 moves nothing: its exercises ask for blocks, not collectives; 16 sends, it has none.
  for (const char* l : {"01", "16"})
    for (std::uint64_t seed = 0; seed < 4; ++seed) CHECK(pick_exercise(l, seed).by_numbers());
  for (const char* l : {"19", "20"}) {  // each ends with a number exercise on its own idea
    const Exercise e = pick_exercise(l, static_cast<std::uint64_t>(exercise_count(l) - 1));
    CHECK(e.by_numbers());
  }
  CHECK_THROWS_AS(pick_exercise("99", 0), Error);
  CHECK_THROWS_AS(pick_exercise("22", 0), Error);
}

TEST_CASE("exercise bank: every case and variant runs as planned, bytes by the ring formulas") {
  int collectives = 0;
  std::set<std::string> ops;
  for (const std::string& lesson : exercise_lessons()) {
    for (std::uint64_t seed = 0; seed < 18; seed += 1) {  // 3 cases x variants 0-5
      const Exercise e = pick_exercise(lesson, seed);
      CAPTURE(e.id);
      if (e.by_numbers()) continue;  // tests/test_exercise_numbers.cpp
      const Solution s = solve(e);  // throws when the ledger is not the plan
      const Mesh mesh = Mesh::parse(e.c.mesh);
      const auto steps = s.plan.collectives();
      REQUIRE(steps.size() == s.right.size());
      for (std::size_t i = 0; i < steps.size(); ++i) {
        std::size_t block = element_bytes(e.c.dtype);
        for (std::size_t d : steps[i]->local_before) block *= d;
        CHECK(s.right[i].bytes == ring_bytes(s.right[i].op, mesh.axes_size(steps[i]->axes), block));
        CHECK(s.right[i].bytes > 0);
        ops.insert(s.right[i].op);
      }
      // Something moves in every case: "none" (or an empty answer) never passes an exercise.
      CHECK_MESSAGE(!s.right.empty(), e.id << " is passed by the answer none");
      CHECK_FALSE(grade(s, {}).pass());
      collectives += static_cast<int>(s.right.size());
      CHECK(s.rule.size() == s.right.size());
    }
  }
  CHECK(collectives > 0);
  CHECK(ops == std::set<std::string>{"all_gather", "all_reduce", "reduce_scatter"});
}

TEST_CASE("exercise: worked by hand") {
  // Lesson 04, Case 1A: C is 8x8 float32 (256 B), all-reduced over Y=4: 2 x 3/4 x 256 = 384.
  Exercise e = pick_exercise("04", 0);
  REQUIRE(e.id == "04.1");
  CHECK(only(solve(e)).text() == "all_reduce C over Y 384");
  // Seed 3 is the same case, variant 1: dims doubled, C 16x16 (1024 B): 1536.
  e = pick_exercise("4", 3);
  CHECK(e.id == "04.1v1");
  CHECK(only(solve(e)).text() == "all_reduce C over Y 1536");
  // Variant 2: float64, original dims: 768.
  CHECK(only(solve(pick_exercise("04", 6))).text() == "all_reduce C over Y 768");
  // Lesson 05, Case 1B: A[8,16] on _,X keeps an 8x8 block (256 B), gathered over X=2: 256; B[16,8]
  // on Y,_ keeps 4x8 (128 B), gathered over Y=4: 384.
  const Solution b = solve(pick_exercise("05", 0));
  REQUIRE(b.right.size() == 2);
  CHECK(b.right[0].text() == "all_gather A over X 256");
  CHECK(b.right[1].text() == "all_gather B over Y 384");
  // Lesson 08, article 003's first GSPMD matmul: x[8,16] on X,Y holds 4x4 (64 B): 3 x 64 = 192;
  // W_in[16,32] on X,Y holds 8x8 (256 B): 1 x 256.
  const Solution g = solve(pick_exercise("08", 0));
  REQUIRE(g.right.size() == 2);
  CHECK(g.right[0].text() == "all_gather x over Y 192");
  CHECK(g.right[1].text() == "all_gather W_in over X 256");
  // Lesson 14: dW 8x8 float32 (256 B) all-reduced over 8 replicas: 2 x 7/8 x 256 = 448.
  CHECK(only(solve(pick_exercise("14", 1))).text() == "all_reduce dW over X 448");
  // Lesson 15, ZeRO-3: W[16,8] split by rows over X=4 holds 4x8 (128 B): 3 x 128 = 384.
  CHECK(only(solve(pick_exercise("15", 0))).text() == "all_gather W over X 384");
  // Lesson 02 with the summed dim whole, u wanted whole: the rows of u gathered, 3 x 4 x 4 B = 48.
  CHECK(only(solve(pick_exercise("02", 2))).text() == "all_gather u over Y 48");
  // Lesson 13, a layer norm's mean: x[2,4,32] with m over Y=4 sums 8 partial means (32 B) over Y:
  // 2 x 3/4 x 32 = 48.
  CHECK(only(solve(pick_exercise("13", 0))).text() == "all_reduce mu over Y 48");
}

TEST_CASE("exercises: no constant answer passes a lesson's exercises") {
  // A learner who types the same answer every time: for each lesson, the right answer of any one
  // exercise and variant fails another of the same lesson (an answer that passed them all would be
  // right for the first, so one of these or an equivalent form of one).
  for (const std::string& lesson : exercise_lessons()) {
    CAPTURE(lesson);
    std::vector<Exercise> all;
    std::vector<std::string> answers;
    for (std::uint64_t seed = 0; seed < static_cast<std::uint64_t>(2 * exercise_count(lesson)); ++seed) {
      all.push_back(pick_exercise(lesson, seed));
      answers.push_back(right_answer_text(all.back()));
    }
    for (const std::string& one : answers) {
      CAPTURE(one);
      int passed = 0;
      for (const Exercise& e : all) {
        bool ok = false;
        try {
          ok = passes(e, one);
        } catch (const Error&) {  // a collectives answer to a number exercise, or the reverse
        }
        passed += ok;
      }
      CHECK(passed >= 1);
      CHECK(passed < static_cast<int>(all.size()));
    }
  }
}

TEST_CASE("exercise answers: the forms a learner types") {
  auto a = parse_answer("AllReduce C over Y 192B;  all-gather W_in over (X,Y) 64\nreduce_scatter y over X 8");
  REQUIRE(a.size() == 3);
  CHECK(a[0].text() == "all_reduce C over Y 192");
  CHECK(a[1].text() == "all_gather W_in over X,Y 64");
  CHECK(a[2].text() == "reduce_scatter y over X 8");
  CHECK(parse_answer("none").empty());
  CHECK(parse_answer("  None ; ").empty());
  CHECK(parse_answer("").empty());
  for (const char* bad : {"all_reduce C Y 192", "broadcast C over Y 8", "all_reduce C over Y -3",
                          "all_reduce C over Y lots", "all_reduce C over Y 99999999999999999999",
                          "none; all_reduce C over Y 8", "all_reduce C over Y 8 extra"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_answer(bad), Error);
  }
}

TEST_CASE("exercise grading: right, wrong bytes, wrong op, extra, missed, none") {
  const Solution s = solve(pick_exercise("05", 0));  // all_gather A over X 256; all_gather B over Y 384
  Grade g = grade(s, parse_answer("all_gather B over Y 384; all_gather A over X 256"));
  CHECK(g.pass());
  CHECK(g.right == 2);
  g = grade(s, parse_answer("all_gather A over X 256; all_gather B over Y 128"));
  CHECK_FALSE(g.pass());
  CHECK(g.right == 1);
  CHECK(g.wrong == 1);
  CHECK(g.lines[1].find("each device sends 384") != std::string::npos);
  g = grade(s, parse_answer("all_gather A over X 256"));
  CHECK(g.missed == 1);
  CHECK(g.lines.back().find("missed: all_gather B over Y 384") != std::string::npos);
  g = grade(s, parse_answer("all_gather A over X 256; all_gather B over Y 384; all_reduce C over X 64"));
  CHECK(g.wrong == 1);
  CHECK_FALSE(g.pass());
  g = grade(s, parse_answer("all_reduce A over X 256; all_gather B over Y 384"));
  CHECK(g.wrong == 1);
  CHECK(g.missed == 0);
  CHECK(g.lines[0].find("wrong op: it is all_gather A over X 256") != std::string::npos);
  g = grade(s, {});
  CHECK_FALSE(g.pass());
}

TEST_CASE("exercise grading: a reduce_scatter and an all_gather in place of the all_reduce are that all_reduce") {
  const Solution s = solve(pick_exercise("02", 0));  // all_reduce u over Y 48
  REQUIRE(only(s).text() == "all_reduce u over Y 48");
  Grade g = grade(s, parse_answer("reduce_scatter u over Y 24; all_gather u over Y 24"));
  CHECK(g.pass());
  CHECK(g.lines.back().find("right: together, one all_reduce u over Y 48") != std::string::npos);
  g = grade(s, parse_answer("all_gather u over Y 24; reduce_scatter u over Y 12"));
  CHECK_FALSE(g.pass());
  CHECK(g.lines.back().find("wrong bytes: the pair is one all_reduce u over Y 48") != std::string::npos);
  g = grade(s, parse_answer("reduce_scatter u over Y 24"));  // half of it
  CHECK_FALSE(g.pass());
  g = grade(s, parse_answer("reduce_scatter u over X 24; all_gather u over X 24"));  // the wrong axis
  CHECK_FALSE(g.pass());
}

TEST_CASE("exercise grading: axes in another order name the same devices") {
  // Lesson 20's router gradient: all_reduce dW_r over X,Y; Y,X is the same group of 4 devices.
  const Exercise e = pick_exercise("20", 0);
  const Solution s = solve(e);
  REQUIRE(s.right.size() == 1);
  REQUIRE(s.right[0].axes == "X,Y");
  const std::string bytes = std::to_string(s.right[0].bytes);
  Grade g = grade(s, parse_answer("all_reduce dW_r over Y,X " + bytes));
  CHECK(g.pass());
  CHECK(g.lines[0].find("right (Y,X names the same devices as X,Y)") != std::string::npos);
  g = grade(s, parse_answer("all_reduce dW_r over X,Y " + bytes));
  CHECK(g.pass());
  CHECK(g.lines[0].find("names the same") == std::string::npos);
  // The pair in place of the all_reduce, with its axes swapped too.
  const std::string half = std::to_string(s.right[0].bytes / 2);
  CHECK(grade(s, parse_answer("reduce_scatter dW_r over (Y,X) " + half + "; all_gather dW_r over X,Y " + half)).pass());
  CHECK_FALSE(grade(s, parse_answer("all_reduce dW_r over Y " + bytes)).pass());  // another group
  CHECK_FALSE(grade(s, parse_answer("all_reduce dW_r over X,Y,X " + bytes)).pass());
}
