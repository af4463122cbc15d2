// Exercises answered with a few named numbers, for lessons whose idea is not which collective runs:
// lesson 01's block map (which block a device holds, how many copies of each), lesson 16's bubble
// and activation stash, lesson 19's ring (shifts and bytes per device) and lesson 20's expert
// capacity and AllToAll bytes. Each right value is worked from the lesson's formula here, apart
// from the code that runs the lesson (tests/test_exercise_numbers.cpp holds them to it). A variant
// (0-5) changes the sizes, so the right values change with the seed.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace shardlab {

struct NumberExercise {
  std::string id, lesson, topic;
  std::string question;           // lines of at most 100 columns, ending with the answer's form
  std::vector<std::string> keys;  // per value asked: its name ("rows", "bubble", "bytes")
  std::vector<std::string> right; // its right value: "4:8", "3/7", "1536"
  std::vector<std::string> why;   // how it comes, in one line
  std::map<std::string, double> sizes;  // what the question gives ("P" 4, "m" 8, "element_bytes" 2)
  std::string mesh, spec;               // lesson 01's mesh and A's spec
};

// How many number exercises lesson `lesson` ("01") has: 0 for most.
int number_exercise_count(const std::string& lesson);
// Exercise `which` (from 0) of the lesson, sizes chosen by `variant` (0-5), named `id`.
NumberExercise number_exercise(const std::string& lesson, int which, int variant, const std::string& id);

// "rows 4:8; cols 0:4" (';' or newlines between items; "name value" or "name = value").
// Error(parse), naming the item, for anything else.
using NumberAnswer = std::vector<std::pair<std::string, std::string>>;
NumberAnswer parse_number_answer(const std::string& text);

// Per value asked, in order: "right", or why not. A range must be the same range; a count or
// bytes the same whole number (a trailing B allowed); a fraction the same value, as p/q or as a
// decimal within 0.0005. Values not asked for are wrong; values not given are missed.
struct NumberGrade {
  std::vector<std::string> lines;
  int right = 0, wrong = 0, missed = 0;
  bool pass() const { return wrong == 0 && missed == 0 && right > 0; }
};
NumberGrade grade_numbers(const NumberExercise& e, const NumberAnswer& given);
// The right answer written as an answer: "rows 4:8; cols 0:4".
std::string number_answer_text(const NumberExercise& e);

}  // namespace shardlab
