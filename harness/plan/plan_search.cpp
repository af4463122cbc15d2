#include "harness/plan/plan_search.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <unordered_map>


#include "collectives/predict.hpp"
#include "harness/cost/cost.hpp"
#include "harness/cost/topology.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/text.hpp"
#include "harness/plan/natural.hpp"
#include "harness/plan/operands.hpp"
#include "harness/plan/plan_assembly.hpp"
#include "harness/plan/plan_search_layouts.hpp"
#include "harness/plan/uneven_steps.hpp"

namespace shardlab {

// The spec without axes of size 1 (they split nothing).
Spec without_unit_axes(const Mesh& mesh, Spec s) {
  auto drop = [&](std::vector<std::string>& l) {
    l.erase(std::remove_if(l.begin(), l.end(), [&](const std::string& a) { return mesh.axis_size(a) == 1; }), l.end());
  };
  for (auto& d : s.dims) drop(d);
  drop(s.partial);
  return s;
}

namespace {

using search_detail::AxisNumbers;
using search_detail::Candidate;
using search_detail::Code;
using search_detail::CodeHash;
using search_detail::Cost;
using search_detail::Lay;
using search_detail::Layouts;
using search_detail::Move;
using search_detail::SearchSides;
using search_detail::Subject;
using search_detail::block_shape;
using search_detail::size_of;
using search_detail::step_cost;
using search_detail::step_of;
using search_detail::uneven_split;

bool better(const Candidate& x, const Candidate& y) { return x.cost < y.cost; }

// The cheapest pair of operand layouts (from the operands' searches `ops`) for each product they
// can form, keyed by the product's layout: a pair multiplies when every dim the operands share is
// split the same way in both and no mesh axis splits a free dim of each.
std::map<Code, Candidate> products_of(const Einsum& eq, const Subject subject[3], const Layouts ops[2], double bound,
                                      const PlanOptions& options) {
  const AxisNumbers& axes = ops[kA].axes();
  // B's layouts by how they split the dims B shares with A: a pair multiplies only if these match.
  const std::string shared = eq.contracted() + eq.batch();
  Lay shared_lay;
  shared_lay.dims.resize(shared.size());
  auto shared_key = [&](const std::string& letters, const Lay& l) {
    for (std::size_t i = 0; i < shared.size(); ++i) shared_lay.dims[i] = l.dims[letters.find(shared[i])];
    return encode(shared_lay);
  };
  struct BSide {
    const Layouts::Node* node;
    Lay lay;
    Shape block;
  };
  std::unordered_map<Code, std::vector<BSide>, CodeHash> b_by_shared;
  for (int k : ops[kB].settled()) {
    BSide side{&ops[kB].node(k), {}, {}};
    decode(side.node->code, side.lay);
    side.block = block_shape(subject[kB], axes, side.lay);
    b_by_shared[shared_key(eq.b, side.lay)].push_back(std::move(side));
  }
  std::map<Code, Candidate> products;
  Lay al, pl;
  for (int k : ops[kA].settled()) {
    const Layouts::Node& an = ops[kA].node(k);
    decode(an.code, al);
    auto match = b_by_shared.find(shared_key(eq.a, al));
    if (match == b_by_shared.end()) continue;
    const Shape a_block = block_shape(subject[kA], axes, al);
    std::uint32_t a_free_axes = 0;
    for (char c : eq.a_free()) a_free_axes |= al.dims[eq.a.find(c)].mask();
    for (const auto& b : match->second) {
      const Cost before = an.cost + b.node->cost;
      if (before.key > bound) break;  // B's layouts come in order of cost
      bool clash = false;
      for (char c : eq.b_free()) clash = clash || (b.lay.dims[eq.b.find(c)].mask() & a_free_axes) != 0;
      if (clash) continue;
      pl.dims.resize(eq.out.size());
      for (std::size_t i = 0; i < eq.out.size(); ++i) {
        const char c = eq.out[i];
        pl.dims[i] = eq.a.find(c) != std::string::npos ? al.dims[eq.a.find(c)] : b.lay.dims[eq.b.find(c)];
      }
      pl.partial.clear();
      for (char c : eq.contracted())
        for (std::uint8_t x : al.dims[eq.a.find(c)]) pl.partial.push_back(x);
      const double flops = contraction_flops(eq, a_block, b.block);
      Cost cost = before;
      if (options.time_on) cost.key += compute_seconds(flops, *options.time_on);
      cost.flops = flops;
      const Code pk = encode(pl, true);
      auto at = products.find(pk);
      if (at != products.end() && !(cost < at->second.cost)) continue;
      products[pk] = Candidate{an.code, b.node->code, encode(pl), cost, flops};
    }
  }
  return products;
}

// How many dims a layout splits, and into how many blocks in all: the tie-breaks of a natural output.
int split_dims(const Spec& s) {
  int n = 0;
  for (const auto& d : s.dims) n += !d.empty();
  return n;
}

// Every complete layout (no partial sums) of the result that a plan costing at most `bound`
// reaches, with the cheapest plan's cost, cheapest first.
std::vector<std::pair<Spec, Cost>> output_costs(const Einsum& eq, const Mesh& mesh, const Operand& a, const Operand& b,
                                                const PlanOptions& options, double bound) {
  const bool uneven = uneven_split(mesh, a.spec, a.shape) || uneven_split(mesh, b.spec, b.shape);
  const Subject subject[3] = {{mesh, a.shape, options.element_bytes, options.time_on, uneven},
                              {mesh, b.shape, options.element_bytes, options.time_on, uneven},
                              {mesh, shape_for(eq.out, eq.sizes(a.shape, b.shape)), options.element_bytes, options.time_on,
                               uneven}};
  const Layouts ops[2] = {Layouts(subject[kA], {{without_unit_axes(mesh, a.spec), Cost{}}}, bound),
                          Layouts(subject[kB], {{without_unit_axes(mesh, b.spec), Cost{}}}, bound)};
  std::vector<std::pair<Code, Cost>> starts;
  for (const auto& kv : products_of(eq, subject, ops, bound, options))
    starts.push_back({kv.second.product, kv.second.cost});
  const Layouts finish(subject[kC], starts, bound);
  std::vector<std::pair<Spec, Cost>> out;
  for (int k : finish.settled()) {
    const Spec spec = finish.spec_of(finish.node(k).code);
    if (!spec.is_partial()) out.push_back({spec, finish.node(k).cost});
  }
  return out;
}

// No output spec: the result takes its natural layout (natural.hpp), and the plan is the search's
// cheapest to it; `article` is the articles' rules' plan to the same layout.
SearchResult search_natural(const Einsum& eq, const Mesh& mesh, const Operand& a, const Operand& b,
                            const PlanOptions& options) {
  const Plan art = plan_contraction(eq, mesh, a, b, std::nullopt, options);  // checks the inputs
  const Spec natural = natural_output(eq, mesh, a.spec, b.spec, art.out_shape, options.gather_first_on_outer_conflict);
  SearchResult r = search_contraction(eq, mesh, a, b, natural, options);
  r.best.out_given = false;
  for (auto& p : r.alternatives) p.out_given = false;
  r.article_output = art.out_spec;
  return r;
}

}  // namespace

SearchResult search_cheapest_output(const Einsum& eq, const Mesh& mesh, const Operand& a, const Operand& b,
                                    const PlanOptions& options) {
  const SearchResult natural = search_contraction(eq, mesh, a, b, std::nullopt, options);
  double bound = plan_objective(natural.best, options.time_on);
  if (options.time_on) bound *= 1 + 1e-9;
  auto outs = output_costs(eq, mesh, a, b, options, bound);
  const Spec nat = without_unit_axes(mesh, natural.best.out_spec);
  auto ways = [&](const Spec& s) { return size_of(mesh, s.used_axes()); };
  const AxisNumbers axes(mesh);
  std::stable_sort(outs.begin(), outs.end(), [&](const std::pair<Spec, Cost>& x, const std::pair<Spec, Cost>& y) {
    if (x.second.key != y.second.key) return x.second.key < y.second.key;
    if (split_dims(x.first) != split_dims(y.first)) return split_dims(x.first) > split_dims(y.first);
    if (ways(x.first) != ways(y.first)) return ways(x.first) > ways(y.first);
    if (x.second.collectives != y.second.collectives) return x.second.collectives < y.second.collectives;
    if ((x.first == nat) != (y.first == nat)) return x.first == nat;
    return axes.key_of(x.first) < axes.key_of(y.first);
  });
  // The natural output is within the bound, so the list is never empty.
  if (outs.empty() || outs.front().first == nat) {
    SearchResult r = natural;
    r.natural = natural.best;
    for (const auto& o : outs) r.outputs.push_back({o.first, o.second.bytes});
    return r;
  }
  const Spec chosen = outs.front().first;
  SearchResult r = search_contraction(eq, mesh, a, b, chosen, options);
  r.best.out_given = false;
  for (auto& p : r.alternatives) p.out_given = false;
  r.natural = natural.best;
  const Operand c{options.result_name, chosen, natural.best.out_shape};
  for (const auto& s : search_reshard(mesh, c, natural.best.out_spec, options)) r.back_to_natural_bytes += s.predicted_bytes;
  for (const auto& o : outs) r.outputs.push_back({o.first, o.second.bytes});
  return r;
}

std::vector<PlanStep> search_reshard(const Mesh& mesh, const Operand& t, const Spec& target,
                                     const PlanOptions& options) {
  t.spec.validate(mesh, t.shape, t.name);
  target.validate(mesh, t.shape, t.name);
  const Subject subject{mesh, t.shape, options.element_bytes, options.time_on,
                       uneven_split(mesh, t.spec, t.shape) || uneven_split(mesh, target, t.shape)};
  const Spec from = without_unit_axes(mesh, t.spec), to = without_unit_axes(mesh, target);
  const Layouts reach(subject, {{from, Cost{}}}, std::numeric_limits<double>::infinity(), &to);
  if (!reach.find(to))
    throw Error(ErrorKind::unsupported, "no collectives take " + t.name + " from " + t.spec.text() + " to " +
                                            target.text());
  std::string letters;
  for (std::size_t d = 0; d < t.shape.size(); ++d) letters += static_cast<char>('a' + d);
  std::vector<PlanStep> steps;
  Spec cur = from;
  for (const auto& m : reach.path_to(to)) steps.push_back(step_of(subject, mesh, m, cur, kC, t.name, letters));
  return steps;
}


std::vector<Reached> reshard_costs(const Mesh& mesh, const Operand& t, const PlanOptions& options) {
  const Subject subject{mesh, t.shape, options.element_bytes, options.time_on, uneven_split(mesh, t.spec, t.shape)};
  const Layouts reach(subject, {{without_unit_axes(mesh, t.spec), Cost{}}}, std::numeric_limits<double>::infinity());
  std::vector<Reached> out;
  for (int k : reach.settled()) {
    const Spec spec = reach.spec_of(reach.node(k).code);
    if (!spec.is_partial()) out.push_back({spec, reach.node(k).cost.bytes});
  }
  return out;
}

std::vector<Reached> contraction_costs(const Einsum& eq, const Mesh& mesh, const Operand& a, const Operand& b,
                                       const PlanOptions& options) {
  std::vector<Reached> out;
  for (const auto& o : output_costs(eq, mesh, a, b, options, std::numeric_limits<double>::infinity()))
    out.push_back({o.first, o.second.bytes});
  return out;
}

double plan_objective(const Plan& plan, const Hardware* hw) {
  if (!hw) return double(plan.predicted_bytes_per_device());
  double seconds = compute_seconds(plan.flops_per_device(), *hw);
  const Subject t[3] = {{plan.mesh, plan.a.shape, plan.element_bytes, hw},
                        {plan.mesh, plan.b.shape, plan.element_bytes, hw},
                        {plan.mesh, plan.out_shape, plan.element_bytes, hw}};
  for (const auto& s : plan.steps) {
    if (!s.communicates() || plan.mesh.axes_size(s.axes) <= 1) continue;
    seconds += step_cost(t[s.operand], s.before, s.after, local_shape(plan.mesh, s.before, t[s.operand].shape), s.kind,
                         s.axes, s.dim, s.to_dim)
                   .key;
  }
  return seconds;
}

namespace {

// The articles' plan to the output, which checks every input (and says what is wrong), and the
// bound it sets: every plan the search keeps must beat or match it. Some partial-sum outputs it
// cannot make: then the search starts from its plan for the natural result, with no bound.
double article_bound(const Einsum& eq, const Mesh& mesh, const Operand& a, const Operand& b, const Spec& out,
                     const PlanOptions& options, SearchResult& r, Plan& base) {
  try {
    r.article = plan_contraction(eq, mesh, a, b, out, options);
    base = r.article;
    const double bound = plan_objective(r.article, options.time_on);
    // Modeled seconds summed in another order may differ in the last bits: keep plans that tie.
    return options.time_on ? bound * (1 + 1e-9) : bound;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::unsupported) throw;
    r.article_refusal = e.what();
    base = plan_contraction(eq, mesh, a, b, std::nullopt, options);
    base.out_spec = out;
    base.out_given = true;
    return std::numeric_limits<double>::infinity();
  }
}

// The best rejected plans: through the other products whose operands cost least, each finished
// by a search of its own (a few small searches, bounded like the first). At most 4, by bytes,
// none the same as the articles' plan or the best.
std::vector<Plan> rejected_plans(const SearchSides& sides, const std::map<Code, Candidate>& products,
                                 const Code& chosen_key, const Code& target, double bound,
                                 const PlanOptions& options, const std::string& art_summary,
                                 const std::string& best_summary) {
  std::vector<const Candidate*> others;
  for (const auto& kv : products)
    if (kv.first != chosen_key) others.push_back(&kv.second);
  std::sort(others.begin(), others.end(), [](const Candidate* x, const Candidate* y) { return better(*x, *y); });
  // Only the first four by bytes are kept (earlier ones first on ties): in bytes, once four are
  // kept, a later search matters only if it ends below the fourth, and is bounded so.
  std::vector<Plan> alt;
  std::vector<std::size_t> kept;  // bytes of the plans the list would keep, ascending
  for (std::size_t i = 0; i < others.size() && i < 8; ++i) {
    double own_bound = bound;
    if (!options.time_on && kept.size() >= 4) {
      own_bound = std::min(bound, double(kept[3]) - 0.5);
      if (others[i]->cost.key > own_bound) break;  // the others come in order of cost
    }
    const Layouts own(sides.subject[kC], std::vector<std::pair<Code, Cost>>{{others[i]->product, others[i]->cost}},
                      own_bound, &target);
    if (!own.find_key(target)) continue;
    alt.push_back(assemble_plan(sides, *others[i], own.path_to(target)));
    const std::string summary = plan_summary(alt.back());
    const std::size_t bytes = alt.back().predicted_bytes_per_device();
    if (summary != art_summary && summary != best_summary)
      kept.insert(std::upper_bound(kept.begin(), kept.end(), bytes), bytes);
  }
  std::stable_sort(alt.begin(), alt.end(), [](const Plan& x, const Plan& y) {
    return x.predicted_bytes_per_device() < y.predicted_bytes_per_device();
  });
  std::vector<Plan> out;
  for (auto& p : alt)
    if (out.size() < 4 && plan_summary(p) != art_summary && plan_summary(p) != best_summary) out.push_back(std::move(p));
  return out;
}

}  // namespace

SearchResult search_contraction(const Einsum& eq, const Mesh& mesh, const Operand& a, const Operand& b,
                                const std::optional<Spec>& out, const PlanOptions& options) {
  // Every placement over every axis is tried: 6 axes take about 2 s, 7 about 90 s and 600 MB.
  int split_axes = 0;
  for (int size : mesh.sizes()) split_axes += size > 1;
  if (split_axes > 6)
    throw Error(ErrorKind::unsupported, "mesh " + mesh.text() + " has " + std::to_string(split_axes) +
                                            " axes of size 2 or more; the planner's search takes at most 6 (merge some axes)");
  if (!out) return search_natural(eq, mesh, a, b, options);
  SearchResult r;
  Plan base;
  const double bound = article_bound(eq, mesh, a, b, *out, options, r, base);
  const Plan& art = base;
  const Spec target = without_unit_axes(mesh, art.out_spec);
  const bool uneven = uneven_split(mesh, a.spec, a.shape) || uneven_split(mesh, b.spec, b.shape) ||
                     uneven_split(mesh, art.out_spec, art.out_shape);
  const Subject subject[3] = {{mesh, a.shape, options.element_bytes, options.time_on, uneven},
                              {mesh, b.shape, options.element_bytes, options.time_on, uneven},
                              {mesh, art.out_shape, options.element_bytes, options.time_on, uneven}};
  const Layouts ops[2] = {Layouts(subject[kA], {{without_unit_axes(mesh, a.spec), Cost{}}}, bound),
                          Layouts(subject[kB], {{without_unit_axes(mesh, b.spec), Cost{}}}, bound)};
  r.layouts_explored = ops[0].settled().size() + ops[1].settled().size();
  const std::map<Code, Candidate> products = products_of(eq, subject, ops, bound, options);
  if (products.empty())
    throw Error(ErrorKind::unsupported, "no plan takes " + a.spec.text() + " x " + b.spec.text() + " to " +
                                            target.text() + " for " + options.result_name);
  // One search over the result's layouts from every product at once, each starting with what its
  // operands cost: the target's cost is then the cheapest plan's.
  std::vector<std::pair<Code, Cost>> starts;
  for (const auto& kv : products) starts.push_back({kv.second.product, kv.second.cost});
  const Code target_key = ops[kA].axes().key_of(target);
  const Layouts finish(subject[kC], starts, bound, &target_key);
  r.layouts_explored += finish.settled().size();
  const auto* done = finish.find_key(target_key);
  if (!done && r.article_refusal.empty()) {  // nothing cheaper than the articles' plan: keep it
    r.best = r.article;
    return r;
  }
  if (!done)
    throw Error(ErrorKind::unsupported, "no plan takes " + a.spec.text() + " x " + b.spec.text() + " to " +
                                            target.text() + " for " + options.result_name);
  Code chosen_product;
  const std::vector<Move> tail = finish.path_to(target_key, &chosen_product);
  const Code chosen_key = search_detail::key_of_code(chosen_product);
  const Candidate chosen = products.at(chosen_key);
  const SearchSides sides{art, subject, ops, {a.name, b.name, options.result_name}, {eq.a, eq.b, eq.out}};
  r.best = assemble_plan(sides, chosen, tail);
  // Ties go to the articles' plan.
  const Cost art_cost{plan_objective(art, options.time_on), art.predicted_bytes_per_device(),
                      static_cast<int>(art.collectives().size())};
  const bool tie = std::abs(art_cost.key - done->cost.key) <= 1e-9 * std::max(1.0, std::abs(art_cost.key)) &&
                   art_cost.bytes == done->cost.bytes && art_cost.collectives == done->cost.collectives;
  if (r.article_refusal.empty() && tie && art.flops_per_device() <= chosen.flops) r.best = art;
  r.alternatives = rejected_plans(sides, products, chosen_key, target_key, bound, options,
                                  r.article_refusal.empty() ? plan_summary(art) : "", plan_summary(r.best));
  return r;
}

}  // namespace shardlab
