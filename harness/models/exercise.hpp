// Graded exercises (`shardlab exercise`): a sharding case of one einsum (mesh, specs, shapes,
// element type) whose collectives and bytes per device the learner names. The right answer is the
// planner's plan under the articles' rules (plan_contraction) and the ledger of running it on a
// sim mesh; the two must agree before anything is graded.
//
// The bank holds hand-written cases for lessons 02-15 and 17-20. Lessons whose idea is not a
// collective (01's block map, 16's bubble and stash) and the ring of 19 and the experts of 20 also
// have exercises answered with named numbers (exercise_numbers.hpp). A seed picks one exercise of
// a lesson and a variant of it: seed / (exercises of the lesson) scales every dim by 1 or 2 and
// cycles the element type (or, for a number exercise, picks other sizes), so the answer changes
// while the rule stays.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "harness/models/exercise_numbers.hpp"
#include "harness/plan/planner.hpp"

namespace shardlab {

struct ExerciseCase {
  std::string lesson;    // "04"
  std::string topic;     // one phrase: what the case is about
  std::string mesh;      // "X=2,Y=4"
  std::string equation;  // "ik,kn->in"
  std::string names;     // "A,B,C": the operands' and the result's labels
  std::string a_spec, b_spec;
  std::string out_spec;  // "" = the product's own spec, partial sums all-reduced
  std::string dims;      // "i=8,k=16,n=8"
  DType dtype = DType::float32;
};

const std::vector<ExerciseCase>& exercise_bank();
// The lessons that have exercises, in order ("01" ... "20").
std::vector<std::string> exercise_lessons();

struct Exercise {
  ExerciseCase c;  // a collectives exercise (when numbers is empty; c.lesson is set either way)
  std::string id;  // "04.2" (lesson, case number from 1), "04.2v3" for variant 3
  int variant = 0;
  std::vector<NumberExercise> numbers;  // one: a number exercise instead of c
  bool by_numbers() const { return !numbers.empty(); }
};
// How many exercises lesson `lesson` ("04") has: bank cases and number exercises.
int exercise_count(const std::string& lesson);

// `lesson` "" = any lesson; otherwise "4" or "04". Error(parse) for a lesson with no exercises.
Exercise pick_exercise(const std::string& lesson, std::uint64_t seed);

// One collective the learner names, or the right one.
struct AnswerItem {
  std::string op, tensor, axes;  // "all_reduce", "C", "X,Y"
  std::size_t bytes = 0;         // sent by each device
  std::string text() const;      // "all_reduce C over Y 192"
};

// "all_reduce C over Y 192; all_gather A over X 64" (';' or newlines between items), or "none".
// Ops may be written AllReduce, all-reduce, allreduce; axes X,Y or (X,Y); bytes may end in B.
// Error(parse), naming the item, for anything else.
std::vector<AnswerItem> parse_answer(const std::string& text);

struct Solution {
  Plan plan;
  std::vector<AnswerItem> right;  // from the ledger, in run order
  std::vector<std::string> rule;  // per right item: the planner's reason
  std::vector<std::string> arithmetic;  // per right item: "2(n-1)/n x 256 B, n = 4"
};

// Plans the case, runs it on a sim mesh and checks that the ledger is the plan (Error(fault)
// otherwise, which would be a bug of ours, not the learner's).
Solution solve(const Exercise& e);

// The question in words, at most 100 columns a line.
std::string question_text(const Exercise& e, const Plan& plan);

struct Grade {
  std::vector<std::string> lines;  // per answer given, then per right one missed
  int right = 0;                   // answers graded right
  int wrong = 0;                   // answers graded wrong (including extra ones)
  int missed = 0;                  // right items nobody named
  bool pass() const { return wrong == 0 && missed == 0; }
};
Grade grade(const Solution& s, const std::vector<AnswerItem>& given);
// The answer `text` graded against exercise e, whichever its kind (Error(parse) if malformed).
bool passes(const Exercise& e, const std::string& text);
// The right answer of e as an answer would write it ("none" when nothing moves).
std::string right_answer_text(const Exercise& e);

}  // namespace shardlab
