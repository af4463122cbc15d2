#include "harness/cli/contraction_report.hpp"

#include "core/text.hpp"
#include "harness/check/pictures.hpp"
#include "harness/cost/cost.hpp"
#include "harness/plan/search_text.hpp"

namespace shardlab {

void print_uneven(std::ostream& out, Report& rep, const Mesh& mesh, const Contraction& c, const Plan& plan) {
  const std::string uneven = uneven_text(mesh, c.a.spec, c.a.shape, plan.a.name, dim_names(c.eq.a)) +
                             uneven_text(mesh, c.b.spec, c.b.shape, plan.b.name, dim_names(c.eq.b)) +
                             uneven_text(mesh, plan.out_spec, plan.out_shape, c.result, dim_names(c.eq.out));
  if (uneven.empty()) return;
  out << "  uneven blocks (--uneven " << uneven_name(mesh.uneven()) << ": "
      << (mesh.uneven() == Uneven::pad ? "every block ceil(d/n) rows, zeros after the real ones, as JAX pads"
                                       : "blocks of ceil(d/n) rows, the last ones shorter, as torch.chunk")
      << "):\n";
  for (const auto& line : split(uneven.substr(0, uneven.size() - 1), '\n')) out << "    " << line << "\n";
  out << "\n";
  rep.strings["uneven"] = uneven_name(mesh.uneven());
}

void print_search(std::ostream& out, Report& rep, const Mesh& mesh, const Contraction& c,
                  const SearchResult& found, const Plan& plan, bool explain) {
  const Hardware* hw = c.options.time_on;
  const std::size_t mine = plan.predicted_bytes_per_device(), art = found.article.predicted_bytes_per_device();
  out << "  search: " << (hw ? "the least modeled time on " + hw->name : std::string("the fewest bytes")) << " of "
      << found.layouts_explored << " layouts explored; ";
  if (hw) {
    const double t = plan_objective(plan, hw);
    out << "this plan " << t * 1e6 << " us";
    if (found.article_refusal.empty())
      out << ", the articles' " << plan_objective(found.article, hw) * 1e6 << " us (" << art << " bytes)";
    out << "\n\n";
    rep.numbers["modeled_seconds"] = t;
    if (found.article_refusal.empty()) rep.numbers["article_modeled_seconds"] = plan_objective(found.article, hw);
    rep.strings["objective"] = "time on " + hw->name;
  } else if (found.article_refusal.empty()) {
    out << "the articles' rules (--plan article) send " << art << " bytes per device to the same output"
        << (art == mine ? ", as many" : ", " + times_text(double(art), double(mine)) + " this plan's") << "\n\n";
    rep.numbers["article_bytes_per_device"] = static_cast<double>(art);
  } else {
    out << "the articles' rules cannot reach this output\n\n";
  }
  if (!c.out_spec && !c.auto_out) {
    const auto note = [&](const Spec& s) { return s.notation(c.result, dim_names(c.eq.out)); };
    out << "  output: no --out-spec, so " << c.result << " takes its natural layout " << note(plan.out_spec)
        << ", as propagation gives it (JAX, DTensor); --out-spec auto finds the cheapest one\n";
    if (found.article_output && without_unit_axes(mesh, *found.article_output) != without_unit_axes(mesh, plan.out_spec))
      out << "  the articles' rules, left to choose, would leave " << note(*found.article_output)
          << " (rule 1 gathers a batch dim the operands split differently; JAX and DTensor keep one split)\n";
    out << "\n";
  }
  if (c.auto_out) {
    out << outputs_text(found) << "\n";
    rep.strings["natural_out_spec"] = found.natural.out_spec.text();
    rep.numbers["natural_bytes_per_device"] = static_cast<double>(found.natural.predicted_bytes_per_device());
    rep.numbers["back_to_natural_bytes_per_device"] = static_cast<double>(found.back_to_natural_bytes);
  }
  if (explain) {
    out << explain_text(found) << "\n";
    const SearchResult other = c.auto_out ? search_contraction(c.eq, mesh, c.a, c.b, std::nullopt, c.options)
                                          : search_cheapest_output(c.eq, mesh, c.a, c.b, c.options);
    out << natural_vs_auto_text(c.auto_out ? other : found, c.auto_out ? found : other) << "\n";
    rep.json["alternatives"] = alternatives_json(found);
  }
}

void report_plan(Report& rep, const Mesh& mesh, const Contraction& c, const Plan& plan, bool plan_only) {
  rep.strings["einsum"] = c.eq.text();
  rep.strings["a_spec"] = c.a.spec.text();
  rep.strings["b_spec"] = c.b.spec.text();
  rep.strings["out_spec"] = plan.out_spec.text();
  rep.strings["plan"] = plan_summary(plan);
  rep.numbers["plan_bytes_per_device"] = static_cast<double>(plan.predicted_bytes_per_device());
  rep.numbers["flops_per_device"] = plan.flops_per_device();
  rep.numbers["unsharded_flops"] = plan.unsharded_flops();
  if (!plan_only) return;
  rep.plan_only = true;
  for (const PlanStep* s : plan.collectives()) {
    CollectiveSummary row;
    row.op = step_kind_name(s->kind);
    row.axes = axes_text(s->axes);
    row.tensor = s->tensor;
    row.group_size = mesh.axes_size(s->axes);
    row.predicted_bytes_per_device = s->predicted_bytes;
    rep.planned.push_back(row);
  }
}

}  // namespace shardlab
