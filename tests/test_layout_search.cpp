// The program's layout search (harness/plan/layout_search.hpp), and a differential test of the
// whole program planner (propagation with its layout search, then plan_tensor_program) against a
// brute force written apart from it: tests/brute_plans.hpp's breadth-first walk over every layout
// one move reaches (Bellman-Ford on the bytes of each move, from the collectives' ring formulas),
// over every assignment of layouts to the free tensors.
// Over 400 lines (471) as one idea: the layout search against one brute-force walk.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "brute_plans.hpp"
#include "core/mesh.hpp"
#include "harness/plan/layout_search.hpp"
#include "harness/plan/program.hpp"
#include "harness/plan/program_plan.hpp"
#include "harness/plan/propagate.hpp"
#include "tests/sanitized.hpp"

using namespace shardlab;

namespace {

TensorProgram program_of(const std::string& name, DimSizes sizes, std::vector<std::pair<std::string, std::string>> inputs,
                         std::vector<ProgramOp> ops, std::vector<std::string> outputs) {
  TensorProgram p;
  p.name = name;
  p.sizes = std::move(sizes);
  p.inputs = std::move(inputs);
  p.ops = std::move(ops);
  p.outputs = std::move(outputs);
  return make_program(std::move(p));
}

ProgramOp einsum_op(const std::string& out, const std::string& eq, const std::string& a, const std::string& b) {
  ProgramOp op;
  op.out = out;
  op.name = "einsum";
  op.kind = OpKind::einsum;
  op.in = {a, b};
  op.eq = eq;
  return op;
}

ProgramOp op_of(const std::string& out, const std::string& name, std::vector<std::string> in, const std::string& over = "") {
  ProgramOp op;
  op.out = out;
  op.name = name;
  op_kind_of(name, op.kind);
  op.in = std::move(in);
  op.over = over;
  return op;
}

// ---- the brute force ----------------------------------------------------------------------

using brute::Layout;
using brute::World;

// Every layout of a tensor of `shape`: each mesh axis (size >= 2) on no dim or on one, in every
// order within a dim, each dim's axes dividing it; the dims in `whole` unsplit. Written here by
// assigning each axis a dim and permuting each dim's list (layout_search.cpp inserts instead).
std::vector<Layout> every_layout(const World& w, const Shape& shape, const std::string& whole_mask) {
  std::vector<int> axes;
  for (int a = 0; a < static_cast<int>(w.sizes.size()); ++a)
    if (w.sizes[a] > 1) axes.push_back(a);
  std::set<Layout> out;
  std::vector<int> where(axes.size(), -1);
  const int rank = static_cast<int>(shape.size());
  for (;;) {
    Layout l;
    l.dims.resize(shape.size());
    for (std::size_t i = 0; i < axes.size(); ++i)
      if (where[i] >= 0) l.dims[where[i]].push_back(axes[i]);
    bool ok = true;
    for (int d = 0; d < rank; ++d) {
      std::size_t n = 1;
      for (int a : l.dims[d]) n *= static_cast<std::size_t>(w.sizes[a]);
      ok = ok && shape[d] % n == 0 && (l.dims[d].empty() || whole_mask[d] == '0');
    }
    if (ok) {
      // every order of every dim's list: the product of the permutations
      std::vector<Layout> orders{l};
      for (int d = 0; d < rank; ++d) {
        std::vector<Layout> next;
        for (const auto& o : orders) {
          auto list = o.dims[d];
          std::sort(list.begin(), list.end());
          do {
            Layout m = o;
            m.dims[d] = list;
            next.push_back(m);
          } while (std::next_permutation(list.begin(), list.end()));
        }
        orders = next;
      }
      out.insert(orders.begin(), orders.end());
    }
    std::size_t i = 0;  // the next assignment of axes to dims, counting in base rank+1
    while (i < axes.size() && ++where[i] == rank) where[i++] = -1;
    if (i == axes.size()) break;
  }
  return {out.begin(), out.end()};
}

Layout layout_of(const Mesh& mesh, const Spec& s) { return brute::to_layout(mesh, s); }

// The bytes of one op of the program with its tensors laid out so, from the definitions of the
// ops (program.hpp) and the brute walk; a map per starting layout keeps each walk.
class BrutePricer {
 public:
  BrutePricer(const TensorProgram& p, const World& w) : p_(p), w_(w) {}

  std::size_t op(const ProgramOp& op, const std::vector<Layout>& in, const Layout& out) {
    const std::string& od = p_.dims.at(op.out);
    auto on_dims = [&](const std::string& dims) {  // out's layout on a subset of its dims
      Layout l;
      for (char c : dims) l.dims.push_back(out.dims[od.find(c)]);
      return l;
    };
    if (op.kind == OpKind::einsum) {
      auto key = std::make_pair(op.out, std::make_pair(in[0], in[1]));
      auto it = einsums_.find(key);
      if (it == einsums_.end())
        it = einsums_.emplace(key, brute::brute_outputs(Einsum::parse(op.eq), w_, p_.shape(op.in[0]), in[0],
                                                       p_.shape(op.in[1]), in[1])).first;
      return cost_in(it->second, out);
    }
    if (op.kind == OpKind::binary) {
      std::size_t sum = 0;
      for (std::size_t k = 0; k < op.in.size(); ++k) sum = add(sum, move(op.in[k], in[k], on_dims(p_.dims.at(op.in[k]))));
      return sum;
    }
    if (op.kind == OpKind::reduce) {  // sum: the reduced dims' axes become partial sums
      const std::string& id = p_.dims.at(op.in[0]);
      Layout start;
      for (std::size_t d = 0; d < id.size(); ++d) {
        if (op.over.find(id[d]) == std::string::npos) start.dims.push_back(in[0].dims[d]);
        else
          for (int a : in[0].dims[d]) start.partial |= 1u << a;
      }
      return move(op.out, start, out);
    }
    return move(op.in[0], in[0], out);  // unary, softmax: the input moved to the output's layout
  }

  static constexpr std::size_t kNever = std::numeric_limits<std::size_t>::max();

 private:
  static std::size_t add(std::size_t a, std::size_t b) { return a == kNever || b == kNever ? kNever : a + b; }
  static std::size_t cost_in(const brute::Reach& r, const Layout& l) {
    auto it = r.index.find(l);
    return it == r.index.end() ? kNever : r.cost[it->second];
  }
  std::size_t move(const std::string& t, const Layout& from, const Layout& to) {
    if (from == to) return 0;
    auto key = std::make_pair(t, from);
    auto it = moves_.find(key);
    if (it == moves_.end()) it = moves_.emplace(key, brute::explore(w_, p_.shape(t), {{from, 0}})).first;
    return cost_in(it->second, to);
  }

  const TensorProgram& p_;
  const World& w_;
  std::map<std::pair<std::string, std::pair<Layout, Layout>>, brute::Reach> einsums_;
  std::map<std::pair<std::string, Layout>, brute::Reach> moves_;
};

// The fewest bytes per device over every assignment of layouts to the tensors in `open` (the
// others lie as `given` says), each op priced alone; SIZE_MAX when over `limit` assignments.
std::size_t brute_program(const TensorProgram& p, const Mesh& mesh, const std::map<std::string, Spec>& given,
                          const std::set<std::string>& open, std::size_t element_bytes, double limit) {
  const World w{mesh.names(), mesh.sizes(), element_bytes};
  std::map<std::string, std::string> whole;  // softmax outputs keep their dim whole
  for (const auto& t : p.tensors()) whole[t] = std::string(p.dims.at(t).size(), '0');
  for (const auto& op : p.ops)
    if (op.kind == OpKind::softmax) whole[op.out][p.dims.at(op.out).find(op.over[0])] = '1';
  std::vector<std::string> names(open.begin(), open.end());
  std::vector<std::vector<Layout>> choices;
  double count = 1;
  for (const auto& t : names) {
    choices.push_back(every_layout(w, p.shape(t), whole[t]));
    count *= double(choices.back().size());
  }
  if (count > limit) return BrutePricer::kNever;
  std::map<std::string, Layout> at;
  for (const auto& [t, s] : given) at[t] = layout_of(mesh, s);
  BrutePricer price(p, w);
  std::size_t best = BrutePricer::kNever;
  std::vector<std::size_t> pick(names.size(), 0);
  for (;;) {
    for (std::size_t i = 0; i < names.size(); ++i) at[names[i]] = choices[i][pick[i]];
    std::size_t sum = 0;
    for (const auto& op : p.ops) {
      std::vector<Layout> in;
      for (const auto& t : op.in) in.push_back(at.at(t));
      const std::size_t c = price.op(op, in, at.at(op.out));
      sum = c == BrutePricer::kNever || sum == BrutePricer::kNever ? BrutePricer::kNever : sum + c;
    }
    best = std::min(best, sum);
    std::size_t i = 0;
    while (i < pick.size() && ++pick[i] == choices[i].size()) pick[i++] = 0;
    if (i == pick.size()) break;
  }
  return best;
}

// ---- random small programs -----------------------------------------------------------------

using Rng = std::mt19937;
int pick(Rng& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

struct RandomCase {
  TensorProgram program;
  Mesh mesh;
  std::map<std::string, std::string> annotations;
  std::string text;  // for failure messages
};

Spec random_layout(Rng& rng, const Mesh& mesh, const Shape& shape) {
  const World w{mesh.names(), mesh.sizes(), 4};
  const auto all = every_layout(w, shape, std::string(shape.size(), '0'));
  return brute::to_spec(w, all[static_cast<std::size_t>(pick(rng, 0, static_cast<int>(all.size()) - 1))]);
}

// Up to 4 ops among einsum, relu, add, mul, sum and softmax over letters a-d, on a mesh of 2-4
// devices with 1 or 2 axes; each input annotated half the time.
RandomCase random_case(Rng& rng) {
  static const char* meshes[] = {"X=2", "X=3", "X=4", "X=2,Y=2"};
  RandomCase c;
  c.mesh = Mesh::parse(meshes[pick(rng, 0, 3)]);
  const bool three = c.mesh.axis_size(c.mesh.names()[0]) == 3;
  DimSizes sizes;
  for (char l : std::string("abcd")) sizes[l] = three ? 6 * static_cast<std::size_t>(pick(rng, 1, 2)) : 4 * static_cast<std::size_t>(pick(rng, 1, 2));
  std::vector<std::pair<std::string, std::string>> inputs;
  std::map<std::string, std::string> dims;  // every tensor so far
  std::vector<ProgramOp> ops;
  auto letters_except = [&](const std::string& used) {
    std::string out;
    for (char l : std::string("abcd"))
      if (used.find(l) == std::string::npos) out += l;
    return out;
  };
  auto new_input = [&](const std::string& d) {
    const std::string name = "in" + std::to_string(inputs.size());
    inputs.push_back({name, d});
    dims[name] = d;
    return name;
  };
  {
    std::string d = "ab";
    if (pick(rng, 0, 1)) d += "c";
    new_input(d);
  }
  const int n_ops = pick(rng, 1, 4);
  std::string last;
  for (int i = 0; i < n_ops; ++i) {
    // The operand: the last op's output, or another tensor so far.
    std::vector<std::string> known;
    for (const auto& kv : dims) known.push_back(kv.first);
    const std::string x = !last.empty() && pick(rng, 0, 2) ? last : known[static_cast<std::size_t>(pick(rng, 0, static_cast<int>(known.size()) - 1))];
    const std::string& xd = dims.at(x);
    const std::string out = "t" + std::to_string(i);
    int kind = pick(rng, 0, 5);
    if (kind == 4 && xd.size() < 2) kind = 1;
    std::string od;
    switch (kind) {
      case 0: {  // einsum: x against a new weight sharing one letter of x (contracted or batch), with one new letter
        const std::string fresh = letters_except(xd);
        const char shared = xd[static_cast<std::size_t>(pick(rng, 0, static_cast<int>(xd.size()) - 1))];
        std::string wd(1, shared);
        if (!fresh.empty()) wd += fresh[static_cast<std::size_t>(pick(rng, 0, static_cast<int>(fresh.size()) - 1))];
        const bool batch = pick(rng, 0, 3) == 0 || wd.size() == 1;
        for (char l : xd)
          if (l != shared || batch) od += l;
        if (wd.size() > 1) od += wd[1];
        if (od.empty() || od.size() > 3) {
          kind = 1;
          od = xd;
          ops.push_back(op_of(out, "relu", {x}));
          break;
        }
        const std::string w = new_input(wd);
        ops.push_back(einsum_op(out, xd + "," + wd + "->" + od, x, w));
        break;
      }
      case 1: od = xd; ops.push_back(op_of(out, pick(rng, 0, 1) ? "relu" : "gelu", {x})); break;
      case 2:
      case 3: {  // add or mul with a tensor of the same dims, or a new one on some of x's dims
        std::string other;
        for (const auto& kv : dims)
          if (kv.first != x && kv.second == xd && pick(rng, 0, 1)) other = kv.first;
        if (other.empty()) {
          std::string sub;
          for (char l : xd)
            if (pick(rng, 0, 1)) sub += l;
          other = new_input(sub.empty() ? xd : sub);
        }
        od = xd;
        ops.push_back(op_of(out, kind == 2 ? "add" : "mul", pick(rng, 0, 1) ? std::vector<std::string>{x, other}
                                                                          : std::vector<std::string>{other, x}));
        break;
      }
      case 4: {  // sum over one letter
        const char l = xd[static_cast<std::size_t>(pick(rng, 0, static_cast<int>(xd.size()) - 1))];
        for (char m : xd)
          if (m != l) od += m;
        ops.push_back(op_of(out, "sum", {x}, std::string(1, l)));
        break;
      }
      default: {  // softmax over one letter
        od = xd;
        ops.push_back(op_of(out, "softmax", {x}, std::string(1, xd[static_cast<std::size_t>(pick(rng, 0, static_cast<int>(xd.size()) - 1))])));
      }
    }
    dims[out] = od;
    last = out;
  }
  std::set<std::string> read;
  for (const auto& op : ops)
    for (const auto& t : op.in) read.insert(t);
  std::vector<std::string> outputs;
  for (const auto& op : ops)
    if (!read.count(op.out)) outputs.push_back(op.out);
  c.program = program_of("random", sizes, inputs, ops, outputs);
  for (const auto& [name, d] : inputs)
    if (pick(rng, 0, 1)) c.annotations[name] = random_layout(rng, c.mesh, c.program.shape(name)).text();
  std::ostringstream os;
  os << "mesh " << c.mesh.text() << "\n" << program_text(c.program) << "annotations:";
  for (const auto& [t, s] : c.annotations) os << " " << t << "=" << s;
  c.text = os.str();
  return c;
}

std::string bucket(double r) {
  if (r < 1) return "< 1.00 (the planner's reuse or deferred sums)";
  if (r == 1) return "= 1.00";
  if (r <= 1.5) return "(1.00, 1.50]";
  if (r <= 2) return "(1.50, 2.00]";
  return "> 2.00";
}

std::string histogram(const std::map<std::string, int>& h, int n) {
  std::string out;
  for (const auto& [b, k] : h) out += "  " + b + ": " + std::to_string(k) + " of " + std::to_string(n) + "\n";
  return out;
}

}  // namespace

TEST_SUITE("layout search") {
  TEST_CASE("every layout: the count of ways to place each mesh axis, checked against the enumeration here") {
    // X=2,Y=2 on a rank-3 tensor of even dims: each axis on none or one of 3 dims (4 x 4 = 16),
    // and the 3 placements with both axes on one dim come in 2 orders: 19.
    const Mesh mesh = Mesh::parse("X=2,Y=2");
    CHECK(all_layouts(mesh, {4, 4, 4}).size() == 19);
    CHECK(every_layout({mesh.names(), mesh.sizes(), 4}, {4, 4, 4}, "000").size() == 19);
    // A dim of 2 takes one axis, not both; a whole dim none: dims (2, 4, 4), dim 1 whole:
    // X and Y each on none, dim 0 or dim 2 (9), minus both on dim 0 (1), plus the second order on dim 2 (1).
    CHECK(all_layouts(mesh, {2, 4, 4}, {1}).size() == 9);
    CHECK(every_layout({mesh.names(), mesh.sizes(), 4}, {2, 4, 4}, "010").size() == 9);
    // Axes of size 1 split nothing; X=3 divides 6 only.
    CHECK(all_layouts(Mesh::parse("X=3,Y=1"), {6, 4}).size() == 2);
    CHECK(all_layouts(mesh, {4, 4}).front() == Spec::parse("_,_"));
  }

  TEST_CASE("layouts auto: an unannotated einsum output lies where it is cheapest to leave it") {
    // bmk,bkn->bmn with A split over b (X=2), B replicated: each device multiplies its batches;
    // the articles' rule already leaves C split over b, so nothing moves (C's 2 x 4 x 8 float32 block
    // gathered would send 256 B).
    const Mesh mesh = Mesh::parse("X=2");
    const TensorProgram bmm = program_of("bmm", {{'b', 4}, {'m', 4}, {'k', 4}, {'n', 8}}, {{"A", "bmk"}, {"B", "bkn"}},
                                         {einsum_op("C", "bmk,bkn->bmn", "A", "B")}, {"C"});
    const Propagation p = propagate(bmm, mesh, {{"A", "X,_,_"}, {"B", "_,_,_"}});
    CHECK(p.specs.at("C").spec == Spec::parse("X,_,_"));
    CHECK(plan_tensor_program(bmm, mesh, p, DType::float32).predicted_bytes_per_device() == 0);

    // matmul on X=4, A X,_ (4x8), B _,X (8x64): the rules give C X,_ (i from A; j's X dropped, used
    // twice), which costs A's gather (3 x 8 floats x 4 B = 96 B) and then C's AllToAll (3/4 of the
    // 4x16 block, 192 B): 288 B. Leaving C as _,X costs the gather alone: 96 B.
    const Mesh x4 = Mesh::parse("X=4");
    const TensorProgram mm = program_of("mm", {{'i', 4}, {'k', 8}, {'j', 64}}, {{"A", "ik"}, {"B", "kj"}},
                                        {einsum_op("C", "ik,kj->ij", "A", "B")}, {"C"});
    const std::map<std::string, std::string> ann{{"A", "X,_"}, {"B", "_,X"}};
    const Propagation rules = propagate(mm, x4, ann, {}, false);
    CHECK(rules.specs.at("C").spec == Spec::parse("X,_"));
    CHECK(plan_tensor_program(mm, x4, rules, DType::float32).predicted_bytes_per_device() == 96 + 192);
    LayoutSearch info;
    const Propagation searched = search_layouts(mm, x4, rules, &info);
    CHECK(info.searched);
    CHECK(info.changed == std::vector<std::string>{"C"});
    CHECK(searched.specs.at("C").spec == Spec::parse("_,X"));
    CHECK(searched.specs.at("C").origin.find("with the rules' X,_ (") != std::string::npos);
    CHECK(plan_tensor_program(mm, x4, searched, DType::float32).predicted_bytes_per_device() == 96);
    CHECK(propagate(mm, x4, ann).specs.at("C").spec == Spec::parse("X,_"));  // rule 7 is off by default
    CHECK(propagate(mm, x4, ann, {}, true).specs.at("C").spec == Spec::parse("_,X"));  // layouts = "auto"
    std::map<std::string, std::string> one = ann;
    one["C"] = "auto";  // shard = { C = "auto" }: rule 7 for C alone
    CHECK(propagate(mm, x4, one).specs.at("C").spec == Spec::parse("_,X"));
    CHECK_THROWS_WITH_AS(propagate(mm, x4, {{"A", "auto"}}), doctest::Contains("A is a program input"), Error);

    // Annotated tensors and tensors like an annotated one are not free: C annotated keeps X,_.
    const Propagation pinned = propagate(mm, x4, {{"A", "X,_"}, {"B", "_,X"}, {"C", "X,_"}}, {}, true);
    CHECK(pinned.specs.at("C").spec == Spec::parse("X,_"));
    // Over the budget, a local search: with one free tensor its greedy pass is the whole search.
    LayoutSearch over;
    const Propagation local = search_layouts(mm, x4, rules, &over, 1);
    CHECK(local.specs.at("C").spec == Spec::parse("_,X"));
    CHECK(local.specs.at("C").origin.find("a local search of") != std::string::npos);
    CHECK(over.searched);
    CHECK_FALSE(over.exhaustive);
    CHECK(info.exhaustive);
  }

  TEST_CASE("differential: the planner against a brute force over every layout of the free tensors") {
    // Random programs of up to 4 ops; the planner is propagate (rules, then the layout search) and
    // plan_tensor_program, forward only. The brute force tries every layout of each tensor the rules
    // left free (rules 3-5), and, for the second count, of every tensor not annotated (rule 2's
    // tensors, which take an annotated tensor's layout by design, too).
    Rng rng(27);
    std::map<std::string, int> free_hist, open_hist, rules_hist;
    int n = 0, skipped = 0;
    double worst = 0;
    // Under a sanitizer a quarter of them (tests/sanitized.hpp): the same paths, fewer programs.
    const int want = shardlab::testing::sanitized_share(200, 4);
    for (int i = 0; i < 2 * want && n < want; ++i) {
      const RandomCase c = random_case(rng);
      CAPTURE(c.text);
      const Propagation prop = propagate(c.program, c.mesh, c.annotations, {}, true);
      const Propagation rules = propagate(c.program, c.mesh, c.annotations, {}, false);
      std::set<std::string> free, open;
      std::map<std::string, Spec> given;
      for (const auto& t : c.program.tensors()) {
        const PropagatedSpec& s = prop.specs.at(t);
        given[t] = s.spec;
        if (s.free) free.insert(t);
        if (!s.annotated) open.insert(t);
      }
      const std::size_t brute_free = brute_program(c.program, c.mesh, given, free, 4, 2e4);
      if (brute_free == BrutePricer::kNever) {
        ++skipped;
        continue;
      }
      ++n;
      const std::size_t planned =
          plan_tensor_program(c.program, c.mesh, prop, DType::float32).predicted_bytes_per_device();
      const std::size_t by_rules =
          plan_tensor_program(c.program, c.mesh, rules, DType::float32).predicted_bytes_per_device();
      auto ratio = [](std::size_t a, std::size_t b) { return b == 0 ? (a == 0 ? 1.0 : 1e9) : double(a) / double(b); };
      CAPTURE(planned);
      CAPTURE(brute_free);
      CHECK(planned <= brute_free);
      worst = std::max(worst, ratio(planned, brute_free));
      ++free_hist[bucket(ratio(planned, brute_free))];
      ++rules_hist[bucket(ratio(by_rules, brute_free))];
      const std::size_t brute_open = brute_program(c.program, c.mesh, given, open, 4, 2e4);
      if (brute_open != BrutePricer::kNever) ++open_hist[bucket(ratio(planned, brute_open))];
    }
    CHECK(n >= want * 3 / 4);
    MESSAGE("planner / brute force over the free tensors' layouts, " << n << " programs (" << skipped
                                                                      << " skipped: over 20000 assignments); worst "
                                                                      << worst << "\n"
                                                                      << histogram(free_hist, n)
                                                                      << "propagation's rules alone / the same brute force:\n"
                                                                      << histogram(rules_hist, n)
                                                                      << "planner / brute force over every unannotated tensor:\n"
                                                                      << histogram(open_hist, n));
  }
}
