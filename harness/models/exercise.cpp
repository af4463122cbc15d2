// `shardlab exercise`: picking an exercise from the bank (exercise_bank.cpp), reading an answer,
// solving it with the planner and grading the answer against the solution.
#include "harness/models/exercise.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "collectives/runtime.hpp"
#include "core/einsum.hpp"
#include "core/error.hpp"
#include "core/mesh.hpp"
#include "core/tensor.hpp"
#include "core/text.hpp"
#include "harness/check/report.hpp"
#include "harness/check/plan_ledger.hpp"

namespace shardlab {

namespace {

// Lower case without '_' and '-': AllReduce, all-reduce and all_reduce read alike.
std::string op_key(const std::string& word) {
  std::string w;
  for (char c : word)
    if (c != '_' && c != '-') w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return w;
}

// The ledger's name of the collective the learner typed (step_kind_name's), or "" for none.
std::string normal_op(const std::string& word) {
  for (StepKind k : {StepKind::all_gather, StepKind::all_reduce, StepKind::reduce_scatter, StepKind::all_to_all,
                     StepKind::all_reduce_max})
    if (op_key(word) == op_key(step_kind_name(k))) return step_kind_name(k);
  return "";
}

std::string normal_axes(std::string text) {
  std::string out;
  for (char c : text)
    if (c != '(' && c != ')' && c != ' ') out += c;
  return out;
}

// Two lists of mesh axes name the same devices whatever their order: "Y,X" is "X,Y" (the group of
// a collective over both axes is every device; the order only numbers them within it).
bool same_axes(const std::string& a, const std::string& b) {
  std::vector<std::string> x = split(a, ','), y = split(b, ',');
  std::sort(x.begin(), x.end());
  std::sort(y.begin(), y.end());
  return x == y;
}

std::string block_formula(StepKind kind, int n, std::size_t block) {
  const std::string b = std::to_string(block) + " B";
  const std::string ns = ", n = " + std::to_string(n);
  switch (kind) {
    case StepKind::all_gather: return "(n-1) x " + b + " block" + ns;
    case StepKind::all_reduce:
    case StepKind::all_reduce_max: return "2(n-1)/n x " + b + " block" + ns;
    case StepKind::collective_permute: return "1 x " + b + " block" + ns;
    default: return "(n-1)/n x " + b + " block" + ns;
  }
}

std::string scaled_dims(const std::string& dims, int scale) {
  std::string out;
  for (const auto& kv : parse_dim_sizes(dims))
    out += (out.empty() ? "" : ",") + std::string(1, kv.first) + "=" + std::to_string(kv.second * scale);
  return out;
}

}  // namespace


std::vector<std::string> exercise_lessons() {
  std::vector<std::string> out;
  for (int l = 1; l <= 21; ++l) {
    const std::string name = (l < 10 ? "0" : "") + std::to_string(l);
    bool any = number_exercise_count(name) > 0;
    for (const auto& c : exercise_bank()) any = any || c.lesson == name;
    if (any) out.push_back(name);
  }
  return out;
}

int exercise_count(const std::string& lesson) {
  int n = number_exercise_count(lesson);
  for (const auto& c : exercise_bank()) n += c.lesson == lesson;
  return n;
}

Exercise pick_exercise(const std::string& lesson, std::uint64_t seed) {
  std::string want = trim(lesson);
  if (want.size() == 1) want = "0" + want;
  // The pool: (lesson, number within the lesson from 0); bank cases first, then number exercises.
  std::vector<std::pair<std::string, int>> pool;
  for (const std::string& l : exercise_lessons())
    if (want.empty() || l == want)
      for (int i = 0; i < exercise_count(l); ++i) pool.emplace_back(l, i);
  if (pool.empty())
    throw Error(ErrorKind::parse, "--lesson " + lesson + " has no exercises; give one of " + join(exercise_lessons(), ", "));
  const auto& [name, number] = pool[seed % pool.size()];
  const int variant = static_cast<int>((seed / pool.size()) % 6);
  Exercise e;
  e.variant = variant;
  e.id = name + "." + std::to_string(number + 1) + (variant ? "v" + std::to_string(variant) : "");
  std::vector<std::size_t> cases;
  for (std::size_t i = 0; i < exercise_bank().size(); ++i)
    if (exercise_bank()[i].lesson == name) cases.push_back(i);
  if (number >= static_cast<int>(cases.size())) {
    e.c.lesson = name;
    e.numbers.push_back(number_exercise(name, number - static_cast<int>(cases.size()), variant, e.id));
    return e;
  }
  e.c = exercise_bank()[cases[number]];
  // Variants: dims x1 or x2; the element type cycles through the case's own, float64, bfloat16.
  e.c.dims = scaled_dims(e.c.dims, 1 + variant % 2);
  const DType types[] = {e.c.dtype, DType::float64, DType::bfloat16};
  e.c.dtype = types[(variant / 2) % 3];
  return e;
}

std::string AnswerItem::text() const {
  return op + " " + tensor + " over " + axes + " " + std::to_string(bytes);
}

std::vector<AnswerItem> parse_answer(const std::string& text) {
  std::string flat = text;
  std::replace(flat.begin(), flat.end(), '\n', ';');
  std::vector<AnswerItem> out;
  bool none = false;
  for (const std::string& part : split(flat, ';')) {
    const std::string item = trim(part);
    if (item.empty()) continue;
    std::string lower = item;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "none" || lower == "nothing") {
      none = true;
      continue;
    }
    std::istringstream in(item);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    const std::string form = "write it as <op> <tensor> over <axes> <bytes>, like all_reduce C over Y 192";
    if (words.size() != 5 || words[2] != "over")
      throw Error(ErrorKind::parse, "the answer '" + excerpt(item) + "' is not understood; " + form);
    AnswerItem a;
    a.op = normal_op(words[0]);
    if (a.op.empty())
      throw Error(ErrorKind::parse, "the answer '" + excerpt(item) + "' names no collective; use all_gather, all_reduce, "
                                    "reduce_scatter, all_to_all or all_reduce_max");
    if (!is_identifier(words[1]))  // echoed in the grade: nothing but a name reaches the terminal
      throw Error(ErrorKind::parse, "the answer '" + excerpt(item) + "' names tensor '" + excerpt(words[1], 20) +
                                        "'; a tensor is a name of letters, digits and _");
    a.tensor = words[1];
    a.axes = normal_axes(words[3]);
    for (const std::string& axis : split(a.axes, ','))
      if (!is_identifier(axis))
        throw Error(ErrorKind::parse, "the answer '" + excerpt(item) + "' gives axes '" + excerpt(words[3], 20) +
                                          "'; name mesh axes, like Y or X,Y");
    std::string bytes = words[4];
    if (bytes.size() > 1 && (bytes.back() == 'B' || bytes.back() == 'b')) bytes.pop_back();
    if (bytes.empty() || bytes.size() > 15 || !std::all_of(bytes.begin(), bytes.end(), ::isdigit))
      throw Error(ErrorKind::parse, "the answer '" + excerpt(item) + "' gives '" + excerpt(words[4], 20) + "' bytes; give a whole number");
    a.bytes = std::stoull(bytes);
    out.push_back(a);
  }
  if (none && !out.empty())
    throw Error(ErrorKind::parse, "the answer says none and also names collectives; give one or the other");
  return out;
}

Solution solve(const Exercise& e) {
  const Mesh mesh = Mesh::parse(e.c.mesh);
  const Einsum eq = Einsum::parse(e.c.equation);
  const DimSizes sizes = parse_dim_sizes(e.c.dims);
  const std::vector<std::string> names = split(e.c.names, ',');
  const Operand a{names.at(0), Spec::parse(e.c.a_spec), shape_for(eq.a, sizes)};
  const Operand b{names.at(1), Spec::parse(e.c.b_spec), shape_for(eq.b, sizes)};
  std::optional<Spec> out;
  if (!e.c.out_spec.empty()) out = Spec::parse(e.c.out_spec);
  PlanOptions options;
  options.result_name = names.at(2);
  options.element_bytes = element_bytes(e.c.dtype);
  Solution s;
  s.plan = plan_contraction(eq, mesh, a, b, out, options);
  Runtime runtime(Backend::sim, false, e.c.dtype);
  const RunResult run = runtime.run(mesh, plan_spmd(s.plan, random_integers(a.shape, 1, -4, 4),
                                                    random_integers(b.shape, 2, -4, 4)));
  const std::vector<CollectiveSummary> rows = summarize(run.ledger);
  const std::string differs = plan_vs_ledger(s.plan, rows);
  if (!differs.empty()) throw Error(ErrorKind::fault, "exercise " + e.id + ": the run is not the plan: " + differs);
  const auto steps = s.plan.collectives();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    s.right.push_back({rows[i].op, rows[i].tensor, normal_axes(rows[i].axes), rows[i].bytes_per_device});
    const PlanStep& st = *steps[i];
    std::size_t block = s.plan.element_bytes;
    for (std::size_t d : st.local_before) block *= d;
    s.rule.push_back(st.reason);
    s.arithmetic.push_back(block_formula(st.kind, mesh.axes_size(st.axes), block));
  }
  return s;
}

std::string question_text(const Exercise& e, const Plan& plan) {
  const Mesh& mesh = plan.mesh;
  const std::vector<std::string> dims_a = dim_names(plan.eq.a), dims_b = dim_names(plan.eq.b),
                                 dims_o = dim_names(plan.eq.out);
  std::ostringstream q;
  q << "Exercise " << e.id << " (lesson " << e.c.lesson << "): " << e.c.topic << "\n"
    << "  mesh " << mesh.text() << " (" << mesh.devices() << " devices), " << dtype_name(e.c.dtype) << " ("
    << element_bytes(e.c.dtype) << " bytes per element)\n"
    << "  " << plan.result_name << " = einsum " << plan.eq.text() << " of " << plan.a.name << " and " << plan.b.name
    << "\n";
  auto row = [&](const Operand& o, const std::vector<std::string>& dn) {
    q << "    " << o.spec.notation(o.name, dn) << "  global " << shape_text(o.shape) << ", spec " << o.spec.text()
      << "\n";
  };
  row(plan.a, dims_a);
  row(plan.b, dims_b);
  if (plan.out_given)
    q << "    " << plan.out_spec.notation(plan.result_name, dims_o) << "  wanted, spec " << plan.out_spec.text() << "\n";
  else
    q << "    " << plan.result_name << ": no output spec; it keeps the product's layout, partial sums made whole\n";
  q << "  Which collectives does each device run (op, tensor, mesh axes), and how many bytes does\n"
       "  each device send in each? One per line, as <op> <tensor> over <axes> <bytes>,\n"
       "  like: all_gather t over X,Y 96\n"
    << "  (\"none\" when nothing moves).\n";
  return q.str();
}

Grade grade(const Solution& s, const std::vector<AnswerItem>& given) {
  Grade g;
  std::vector<bool> used(s.right.size(), false);
  auto pad = [](const std::string& t) { return t.size() < 34 ? t + std::string(34 - t.size(), ' ') : t + "  "; };
  if (given.empty()) {
    if (s.right.empty()) {
      g.lines.push_back("  " + pad("none") + "right: nothing moves");
      ++g.right;
    } else {
      g.lines.push_back("  " + pad("none") + "wrong: " + std::to_string(s.right.size()) + " collective" +
                        (s.right.size() == 1 ? "" : "s") + " must run");
      ++g.wrong;
    }
  }
  const std::size_t nowhere = s.right.size();
  // The first right item not yet matched that names the same tensor and axes (and, with `same_op`,
  // the same collective); `nowhere` when there is none.
  auto unmatched = [&](const AnswerItem& a, bool same_op) {
    for (std::size_t i = 0; i < s.right.size(); ++i)
      if (!used[i] && s.right[i].tensor == a.tensor && same_axes(s.right[i].axes, a.axes) &&
          (!same_op || s.right[i].op == a.op))
        return i;
    return nowhere;
  };
  // A reduce_scatter and an all_gather of the same tensor over the same axes, in place of an
  // all_reduce the plan runs, are that all_reduce (a ring AllReduce is exactly the pair): right
  // when their bytes add up to it, and said so.
  std::vector<bool> paired(given.size(), false);
  for (std::size_t i = 0; i < s.right.size(); ++i) {
    if (s.right[i].op != "all_reduce" || unmatched(s.right[i], true) != i) continue;
    for (std::size_t r = 0; r < given.size(); ++r)
      for (std::size_t h = 0; h < given.size(); ++h) {
        const AnswerItem &rs = given[r], &ag = given[h];
        if (used[i] || paired[r] || paired[h] || rs.op != "reduce_scatter" || ag.op != "all_gather" ||
            rs.tensor != s.right[i].tensor || ag.tensor != rs.tensor || !same_axes(rs.axes, s.right[i].axes) ||
            !same_axes(ag.axes, rs.axes))
          continue;
        paired[r] = paired[h] = used[i] = true;
        const bool sum = rs.bytes + ag.bytes == s.right[i].bytes;
        g.lines.push_back("  " + rs.text() + " +");
        g.lines.push_back("  " + pad(ag.text()) + (sum ? "right: together, one " : "wrong bytes: the pair is one ") +
                          s.right[i].text());
        ++(sum ? g.right : g.wrong);
      }
  }
  for (std::size_t k = 0; k < given.size(); ++k) {
    if (paired[k]) continue;
    const AnswerItem& a = given[k];
    std::size_t hit = unmatched(a, true);
    if (hit == nowhere) {
      hit = unmatched(a, false);  // the right tensor and axes, but another collective?
      if (hit != nowhere) used[hit] = true;
      g.lines.push_back("  " + pad(a.text()) +
                        (hit != nowhere   ? "wrong op: it is " + s.right[hit].text()
                         : s.right.empty() ? std::string("wrong: nothing moves in this case")
                                           : "wrong: the plan runs no " + a.op + " of " + a.tensor + " over " + a.axes));
      ++g.wrong;
      continue;
    }
    used[hit] = true;
    if (s.right[hit].bytes == a.bytes) {
      g.lines.push_back("  " + pad(a.text()) + "right" +
                        (a.axes == s.right[hit].axes ? "" : " (" + a.axes + " names the same devices as " + s.right[hit].axes + ")"));
      ++g.right;
    } else {
      g.lines.push_back("  " + pad(a.text()) + "wrong bytes: each device sends " +
                        std::to_string(s.right[hit].bytes));
      ++g.wrong;
    }
  }
  for (std::size_t i = 0; i < s.right.size(); ++i)
    if (!used[i] && !given.empty()) {
      g.lines.push_back("  " + pad("(not named)") + "missed: " + s.right[i].text());
      ++g.missed;
    }
  return g;
}

bool passes(const Exercise& e, const std::string& text) {
  if (e.by_numbers()) return grade_numbers(e.numbers[0], parse_number_answer(text)).pass();
  return grade(solve(e), parse_answer(text)).pass();
}

std::string right_answer_text(const Exercise& e) {
  if (e.by_numbers()) return number_answer_text(e.numbers[0]);
  std::vector<std::string> items;
  for (const auto& a : solve(e).right) items.push_back(a.text());
  return items.empty() ? "none" : join(items, "; ");
}

}  // namespace shardlab
