// Graded exercises (`shardlab exercise`): a sharding case of one einsum (mesh, specs, shapes,
// element type) whose collectives and bytes per device the learner names. The right answer is the
// planner's plan under the articles' rules (plan_contraction) and the ledger of running it on a
// sim mesh; the two must agree before anything is graded.
//
// The bank holds hand-written cases for lessons 01-15 and 17 (lesson 16's pipeline moves
// activations by send/recv, not by a collective, and has none). A seed picks one case of a lesson
// and a variant of it: seed / (cases of the lesson) scales every dim by 1 or 2 and cycles the
// element type, so the bytes change while the rule stays.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.hpp"
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
// The lessons that have exercises, in order ("01" ... "17").
std::vector<std::string> exercise_lessons();

struct Exercise {
  ExerciseCase c;
  std::string id;  // "04.2" (lesson, case number from 1), "04.2v3" for variant 3
  int variant = 0;
};

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

}  // namespace shardlab
