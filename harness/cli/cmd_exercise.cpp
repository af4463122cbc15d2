#include "harness/cli/cmd_exercise.hpp"

#include <unistd.h>

#include <iostream>
#include <functional>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/text.hpp"
#include "core/table.hpp"
#include "harness/models/exercise.hpp"

namespace shardlab {

namespace {

struct ExerciseOptions {
  std::string lesson, answer;
  std::uint64_t seed = 0;
  bool json = false, list = false;
};

int list() {
  Table t({"lesson", "exercises", "first topic"});
  std::size_t total = 0;
  for (const std::string& l : exercise_lessons()) {
    std::string first;
    for (const auto& c : exercise_bank())
      if (c.lesson == l && first.empty()) first = c.topic;
    if (first.empty()) first = number_exercise(l, 0, 0, l + ".1").topic;
    if (first.size() > 66) first = first.substr(0, 63) + "...";
    t.add({l, std::to_string(exercise_count(l)), first});
    total += static_cast<std::size_t>(exercise_count(l));
  }
  std::cout << "shardlab exercise: " << total << " exercises; each --seed picks one of the lesson and a variant\n"
            << "(dims x1 or x2 and element type float32, float64 or bfloat16; or other sizes)\n"
            << t.text() << "Try: build/bin/shardlab exercise --lesson 04 --seed 1\n";
  return 0;
}

nlohmann::ordered_json question_json(const Exercise& e, const Plan& plan) {
  auto operand = [](const Operand& o, const std::string& letters) {
    return nlohmann::ordered_json{{"name", o.name}, {"dims", letters}, {"shape", o.shape}, {"spec", o.spec.text()}};
  };
  nlohmann::ordered_json j = {{"id", e.id},
                              {"lesson", e.c.lesson},
                              {"topic", e.c.topic},
                              {"mesh", e.c.mesh},
                              {"dtype", dtype_name(e.c.dtype)},
                              {"element_bytes", element_bytes(e.c.dtype)},
                              {"einsum", plan.eq.text()},
                              {"a", operand(plan.a, plan.eq.a)},
                              {"b", operand(plan.b, plan.eq.b)},
                              {"result", plan.result_name},
                              {"out_spec", plan.out_given ? nlohmann::ordered_json(plan.out_spec.text())
                                                          : nlohmann::ordered_json(nullptr)},
                              {"answer_format", "<op> <tensor> over <axes> <bytes sent per device>; ...  or none"}};
  return j;
}

// One collective per line until an empty line or the end of input. At a terminal a line that is
// not understood is explained and asked again; from a pipe it is bad input (Error, exit 2).
// Input is bounded as case files are: a line of at most kAnswerLine bytes, at most kAnswerLines
// lines (an answer has a handful; /dev/zero or a stray binary file must not fill the memory).
constexpr std::size_t kAnswerLine = 4096;
constexpr int kAnswerLines = 256;

// One line of stdin into `line`; false at the end of input. Error(parse) past kAnswerLine bytes.
bool read_answer_line(std::string& line) {
  line.clear();
  for (int c; (c = std::cin.get()) != EOF;) {
    if (c == '\n') return true;
    if (line.size() == kAnswerLine)
      throw Error(ErrorKind::parse, "an answer line is longer than " + std::to_string(kAnswerLine) +
                                        " bytes (it starts '" + excerpt(line) + "'); give one collective per line");
    line += static_cast<char>(c);
  }
  return !line.empty();
}

// The answer's lines, joined by ';'. `check` throws Error(parse) for a line not understood.
// `answered` says whether any line was understood ("none" is an answer with no items).
std::string read_answer_interactively(bool& answered, const std::function<void(const std::string&)>& check) {
  const bool tty = isatty(STDIN_FILENO);
  std::string all;
  std::string line;
  for (int n = 1, lines = 0;; ++lines) {
    if (lines == kAnswerLines)
      throw Error(ErrorKind::parse, "the answer has more than " + std::to_string(kAnswerLines) +
                                        " lines; an exercise needs a handful, then an empty line");
    if (tty) std::cout << "answer " << n << " (empty line to finish)> " << std::flush;
    if (!read_answer_line(line) || trim(line).empty()) break;
    try {
      check(line);
      all += (all.empty() ? "" : ";") + line;
      answered = true;
      ++n;
    } catch (const Error& err) {
      if (!tty) throw;
      std::cout << "  " << err.what() << "\n";
    }
  }
  return all;
}

// The answer from --answer, a pipe or the terminal, with the question printed before a terminal's
// answer and after any other (so a malformed answer exits 2 before anything prints).
std::string take_answer(const ExerciseOptions& o, const std::string& question,
                        const std::function<void(const std::string&)>& check) {
  if (!o.answer.empty()) {
    check(o.answer);
    std::cout << question;
    return o.answer;
  }
  bool answered = false;
  const bool piped = !isatty(STDIN_FILENO);
  std::string text;
  if (piped) text = read_answer_interactively(answered, check);
  std::cout << question;
  if (!piped) text = read_answer_interactively(answered, check);
  // An empty line or the end of input before any answer is graded, as wrong: every exercise asks
  // for something (a pasted command still exits 0 or 1, never 2).
  if (!answered) std::cout << "\nNo answer given (an empty line or the end of input first): graded as none.\n";
  return text;
}

int verdict(bool pass, const std::string& id, int right, int total, const ExerciseOptions& o, const std::string& lesson) {
  std::cout << "\n" << (pass ? "PASS" : "FAIL") << " exercise " << id << ": " << right << " of " << total << " right";
  if (!pass) std::cout << "; try another: build/bin/shardlab exercise --lesson " << lesson << " --seed " << o.seed + 1;
  std::cout << "\n";
  return pass ? 0 : 1;
}

// A number exercise (exercise_numbers.hpp): named values instead of collectives.
int run_numbers(const ExerciseOptions& o, const NumberExercise& e) {
  if (o.json) {
    if (!o.answer.empty()) throw Error(ErrorKind::parse, "--json prints the question only; drop --answer");
    const nlohmann::ordered_json j = {{"id", e.id},       {"lesson", e.lesson}, {"topic", e.topic},
                                      {"question", e.question}, {"asks", e.keys},
                                      {"answer_format", "<name> <value>; ...  (a value: n, p/q or a:b)"}};
    std::cout << j.dump(2) << std::endl;
    return 0;
  }
  const std::string text = take_answer(o, e.question, [](const std::string& t) { parse_number_answer(t); });
  const NumberGrade g = grade_numbers(e, parse_number_answer(text));
  std::cout << "\nYour answer                         grade\n";
  for (const auto& line : g.lines) std::cout << line << "\n";
  std::cout << "\nThe right answer (by the lesson's formulas):\n";
  for (std::size_t i = 0; i < e.keys.size(); ++i)
    std::cout << "  " << e.keys[i] << " " << e.right[i] << "\n      why:   " << e.why[i] << "\n";
  return verdict(g.pass(), e.id, g.right, g.right + g.wrong + g.missed, o, e.lesson);
}

int run(const ExerciseOptions& o) {
  if (o.list) return list();
  const Exercise e = pick_exercise(o.lesson, o.seed);
  if (e.by_numbers()) return run_numbers(o, e.numbers[0]);
  const Solution s = solve(e);
  if (o.json) {
    if (!o.answer.empty()) throw Error(ErrorKind::parse, "--json prints the question only; drop --answer");
    std::cout << question_json(e, s.plan).dump(2) << std::endl;
    return 0;
  }
  const std::string text = take_answer(o, question_text(e, s.plan), [](const std::string& t) { parse_answer(t); });
  const Grade g = grade(s, parse_answer(text));
  std::cout << "\nYour answer                         grade\n";
  for (const auto& line : g.lines) std::cout << line << "\n";
  std::cout << "\nThe right answer (the planner's plan under the articles' rules; the sim run's ledger agrees):\n";
  if (s.right.empty()) std::cout << "  none: every device already holds what its product needs, and the result is "
                                    "as wanted\n";
  for (std::size_t i = 0; i < s.right.size(); ++i)
    std::cout << "  " << s.right[i].text() << "\n      why:   " << s.rule[i] << "\n      bytes: "
              << s.arithmetic[i] << "\n";
  return verdict(g.pass(), e.id, g.right, g.right + g.wrong + g.missed, o, e.c.lesson);
}

}  // namespace

Command add_exercise_command(CLI::App& app) {
  auto o = std::make_shared<ExerciseOptions>();
  auto* c = app.add_subcommand("exercise", "a sharding case to solve: name its collectives and bytes, and be graded");
  c->add_option("--lesson", o->lesson, "the lesson whose exercises to pick from, like 04 (default: any)");
  c->add_option("--seed", o->seed, "which case of the lesson, and which variant")->capture_default_str();
  c->add_option("--answer", o->answer,
                "the answer, instead of typing it: \"all_reduce C over Y 192; all_gather A over X 64\", none, or "
                "for a number exercise \"rows 4:8; cols 0:4\"");
  c->add_flag("--json", o->json, "print the question (without its answer) as JSON");
  c->add_flag("--list", o->list, "list the lessons that have exercises");
  return {c, [o] { return run(*o); }};
}

}  // namespace shardlab
