#include "harness/plan/search_text.hpp"

#include <nlohmann/json.hpp>

#include "core/table.hpp"
#include "core/text.hpp"
#include "harness/plan/operands.hpp"

namespace shardlab {

namespace {

using Axes = std::vector<std::string>;

}  // namespace

std::string cases_text(const Einsum& eq, const Mesh& mesh, const Spec& a_in, const Spec& b_in) {
  const Spec a = without_unit_axes(mesh, a_in), b = without_unit_axes(mesh, b_in);
  bool same = false, mismatch = false, one_side = false;
  for (char c : eq.contracted()) {
    const Axes& x = a.dims[eq.a.find(c)];
    const Axes& y = b.dims[eq.b.find(c)];
    if (x.empty() && y.empty()) continue;
    if (x == y) same = true;
    else if (!x.empty() && !y.empty()) mismatch = true;
    else one_side = true;
  }
  Axes a_free, b_free;
  for (char c : eq.a_free()) for (const auto& x : a.dims[eq.a.find(c)]) a_free.push_back(x);
  for (char c : eq.b_free()) for (const auto& x : b.dims[eq.b.find(c)]) b_free.push_back(x);
  bool clash = false;
  for (const auto& x : a_free) clash = clash || contains_axis(b_free, x);
  const bool outer = !a_free.empty() || !b_free.empty();
  std::vector<std::string> article;
  if (same) article.push_back("Case 1A");
  if (mismatch || one_side) article.push_back("Case 1B");
  if (outer) article.push_back("Case 2");
  std::string out = article.empty() ? "nothing split" : join(article, " + ");
  if (outer && (same || mismatch || one_side)) out += " (full sharding)";
  std::vector<std::string> book;
  if (!same && !mismatch && !one_side) book.push_back("1");
  if (one_side || mismatch) book.push_back("2");
  if (same) book.push_back("3");
  if (clash) book.push_back("4");
  return out + "; book case " + join(book, " + ");
}

std::string times_text(double a, double b) {
  if (b <= 0) return a > 0 ? "infinitely many times" : "1.00x";
  return format_number(a / b, "%.2f") + "x";
}

std::string explain_text(const SearchResult& r) {
  const std::size_t best = r.best.predicted_bytes_per_device();
  auto block = [&](const std::string& label, const Plan& p) {
    const std::size_t bytes = p.predicted_bytes_per_device(), n = p.collectives().size();
    std::string out = "  " + label + ": " + std::to_string(bytes) + " B per device";
    if (&p != &r.best) out += bytes == best ? " (as many)" : " (" + times_text(double(bytes), double(best)) + ")";
    out += ", " + std::to_string(n) + " collective" + (n == 1 ? "" : "s") + ", multiplies as " +
           cases_text(p.eq, p.mesh, p.a_used, p.b_used) + "\n";
    for (const auto& s : p.steps) {
      std::string what = s.kind == StepKind::contract ? "contract" : step_kind_name(s.kind) + " " + s.tensor;
      if (!s.axes.empty()) what += " over " + axes_text(s.axes);
      out += "      " + what + ": " + (s.kind == StepKind::contract ? s.after.text() : s.before.text() + " -> " + s.after.text()) +
             (s.predicted_bytes ? ", " + std::to_string(s.predicted_bytes) + " B" : "") + "\n";
    }
    return out;
  };
  const Plan& given = r.article_refusal.empty() ? r.article : r.best;
  std::string out = "Why this plan (--explain): the inputs are " +
                    cases_text(given.eq, given.mesh, given.a.spec, given.b.spec) +
                    ";\nthe search compared every product it could form; each plan multiplies in the case named\n";
  out += block("chosen", r.best);
  if (r.article_refusal.empty())
    out += block("the articles' rules", r.article);
  else
    out += "  the articles' rules: none (" + r.article_refusal + ")\n";
  for (std::size_t i = 0; i < r.alternatives.size(); ++i) out += block("rejected " + std::to_string(i + 1), r.alternatives[i]);
  return out;
}

std::string natural_vs_auto_text(const SearchResult& natural, const SearchResult& cheapest) {
  const Plan& n = natural.best;
  const Plan& c = cheapest.best;
  const std::vector<std::string> names = dim_names(n.eq.out);
  Table t({"output", "layout", "B per device", "collectives", "then back to natural"});
  t.add({"natural (default)", n.out_spec.notation(n.result_name, names), std::to_string(n.predicted_bytes_per_device()),
         std::to_string(n.collectives().size()), "-"});
  t.add({"cheapest (auto)", c.out_spec.notation(c.result_name, names), std::to_string(c.predicted_bytes_per_device()),
         std::to_string(c.collectives().size()),
         "+" + std::to_string(cheapest.back_to_natural_bytes) + " B"});
  return "The natural output and --out-spec auto's, side by side:\n" + t.text();
}

std::string outputs_text(const SearchResult& r) {
  if (r.outputs.empty()) return "";
  const Plan& p = r.best;
  const std::vector<std::string> names = dim_names(p.eq.out);
  const Spec nat = without_unit_axes(p.mesh, r.natural.out_spec);
  auto note = [&](const Spec& s) { return s.notation(p.result_name, names); };
  const std::size_t best = r.outputs.front().second, natural = r.natural.predicted_bytes_per_device();
  std::string out = "Why this output (--out-spec auto): " + note(p.out_spec) + " is the cheapest layout " +
                    p.result_name + " can reach, " + std::to_string(best) + " B per device.\n";
  if (without_unit_axes(p.mesh, p.out_spec) == nat)
    out += "  It is the natural output too (what propagation gives, as JAX and DTensor do).\n";
  else
    out += "  The natural output (what propagation gives, as JAX and DTensor do) is " + note(r.natural.out_spec) +
           ", " + std::to_string(natural) + " B per device.\n  Not free downstream: a next op that wants " +
           note(r.natural.out_spec) + " sends " + std::to_string(r.back_to_natural_bytes) +
           " B more per device to get it back, " + std::to_string(best + r.back_to_natural_bytes) + " B in all.\n";
  out += "  Ties go to the layout that splits the most dims. Every layout reachable for no more than the "
         "natural plan:\n";
  std::size_t shown = 0;  // the 8 cheapest, and the natural output wherever it ranks
  for (const auto& [spec, bytes] : r.outputs) {
    if (shown >= 8 && spec != nat) continue;
    out += "    " + note(spec) + ": " + std::to_string(bytes) + " B" + (spec == nat ? " (the natural output)" : "") +
           (shown == 0 ? " (chosen)" : "") + "\n";
    ++shown;
  }
  if (shown < r.outputs.size()) out += "    and " + std::to_string(r.outputs.size() - shown) + " more\n";
  return out;
}

std::string alternatives_json(const SearchResult& r) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  auto add = [&](const std::string& label, const Plan& p) {
    out.push_back({{"label", label},
                   {"bytes_per_device", p.predicted_bytes_per_device()},
                   {"collectives", p.collectives().size()},
                   {"plan", plan_summary(p)}});
  };
  add("chosen", r.best);
  if (r.article_refusal.empty()) add("article", r.article);
  for (const auto& p : r.alternatives) add("rejected", p);
  return out.dump();
}

}  // namespace shardlab
