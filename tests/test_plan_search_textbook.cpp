// Textbook cases for the planner: each row is a contraction as a source prints it,
// with the output layout, the collectives and the bytes per device that source gives. The rows were
// written from the sources, not from shardlab's output; where a source leaves a size open, the sizes
// are picked in the regime the source describes (e.g. weights larger than activations for tensor
// parallelism), so that its plan is also the one sending the fewest bytes.
//
// Sources (read in their repositories):
//   book      jax-ml/scaling-book sharding.md (Part 3, "Sharded Matrices and How to Multiply Them") at
//             0819a7d (Feb 2025; the same text in the Aug 2025 revision) and training.md (Part 5,
//             "How to Parallelize a Transformer for Training"): cases 1-4, the pop quizzes and the
//             worked problems; the DP, FSDP, tensor-parallel and mixed algorithms step by step.
//   article   /work/shared/seeds/001 (irhum.github.io/blog/pjit): Case 1A, Case 1B, Full Sharding
//             and the GSPMD FFN ("Embed -> Hidden", "Hidden -> Embed").
//   DTensor   pytorch/pytorch: torch/distributed/tensor/_ops/_einsum_strategy.py (the strategies of
//             one mesh dim), _ops/_matrix_ops.py (mm, bmm, einsum use them), _collective_utils.py
//             (redistribute_cost: leaving Replicate costs 0, so DTensor slices for free),
//             parallel/style.py (ColwiseParallel, RowwiseParallel), and the tests
//             test/distributed/tensor/test_op_strategy.py, test_matrix_ops.py and
//             parallel/test_tp_examples.py.
//
// Translation. A mesh axis the source calls X or Y keeps its name; DTensor's 1-D mesh of 4 is X=4
// and its 2-D mesh (2, 2) is X=2,Y=2 (mesh dim 0 is X). Shard(d) on one mesh dim is that axis on
// dim d; Partial is a kept partial sum `{X}`. DTensor leaves Partial in place until a later op or
// full_tensor() needs the value, and then redistributes it with an all_reduce; the book writes
// {U_X} and AllReduces it. shardlab's natural output completes partial sums (DESIGN.md, "Natural
// outputs"), so a row whose source keeps the partial sum passes the output spec `_{X}` explicitly,
// and a row whose source gives an output layout of its own choosing (a ReduceScatter, a
// ColwiseParallel layer) passes that layout. Every other row passes no output spec: it checks the
// natural output.
//
// Bytes per device, float32, by the ring formulas (n = the size of the group over the named axes):
//   AllGather      (n - 1) x the local block it starts from
//   ReduceScatter  (n - 1) / n x the local input (the partial block)
//   AllReduce      2 (n - 1) / n x the local block
//   AllToAll       (n - 1) / n x the local block
// Each expected collective names its local block's shape; the bytes come from the formula below.
// Collectives are compared per tensor, in order: the two operands move independently before the
// contraction, so only the order within one tensor is a property of the plan.
// Over 400 lines (525) as one idea: one table of rows from the sources.
#include <doctest/doctest.h>

#include <algorithm>
#include <exception>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/einsum.hpp"
#include "core/mesh.hpp"
#include "core/spec.hpp"
#include "harness/plan/plan_search.hpp"
#include "harness/plan/planner.hpp"

using namespace shardlab;

namespace {

constexpr std::size_t kFloat32 = 4;

// One collective as the source gives it: the op, the tensor, the mesh axes of its group and the
// local block (its shape on one device) the collective starts from.
struct Want {
  StepKind kind;
  std::string tensor;
  std::vector<std::string> axes;
  Shape block;
};

enum class From { book_sharding, book_training, article, dtensor };

struct Row {
  From from;
  const char* source;  // where in the source, printed on failure
  const char* eq;
  const char* mesh;
  const char* a_name;
  const char* a_spec;
  Shape a_shape;
  const char* b_name;
  const char* b_spec;
  Shape b_shape;
  const char* c_name;
  const char* out;       // the output spec passed to the planner; nullptr: the natural output
  const char* want_out;  // the layout the source leaves the result in
  std::vector<Want> want;
};

std::size_t elements(const Shape& s) {
  std::size_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// The ring formulas of the header, on a block of `block` float32 elements over a group of n.
std::size_t ring_bytes(StepKind kind, std::size_t n, const Shape& block) {
  const std::size_t b = elements(block) * kFloat32;
  switch (kind) {
    case StepKind::all_gather: return (n - 1) * b;
    case StepKind::reduce_scatter: return (n - 1) * b / n;
    case StepKind::all_reduce: return 2 * (n - 1) * b / n;
    case StepKind::all_to_all: return (n - 1) * b / n;
    default: return 0;
  }
}

// "all_gather B over X 192 B", the form both sides are compared in. An AllReduce's group is the
// same whatever order its axes are named in; the other ops' axis order is a layout (X major).
std::string line(StepKind kind, const std::string& tensor, std::vector<std::string> axes, std::size_t bytes) {
  if (kind == StepKind::all_reduce) std::sort(axes.begin(), axes.end());
  return step_kind_name(kind) + " " + tensor + " over " + axes_text(axes) + " " + std::to_string(bytes) + " B";
}

using PerTensor = std::map<std::string, std::vector<std::string>>;

PerTensor expected(const Mesh& mesh, const std::vector<Want>& want, std::size_t* total) {
  PerTensor m;
  *total = 0;
  for (const auto& w : want) {
    const auto n = static_cast<std::size_t>(mesh.axes_size(w.axes));
    // The formulas divide exactly for every row (a check on the table, not on the tool).
    REQUIRE(((n - 1) * elements(w.block) * kFloat32) % n == 0);
    const std::size_t bytes = ring_bytes(w.kind, n, w.block);
    m[w.tensor].push_back(line(w.kind, w.tensor, w.axes, bytes));
    *total += bytes;
  }
  return m;
}

PerTensor actual(const std::vector<const PlanStep*>& steps) {
  PerTensor m;
  for (const PlanStep* s : steps) m[s->tensor].push_back(line(s->kind, s->tensor, s->axes, s->predicted_bytes));
  return m;
}

std::string text(const PerTensor& m) {
  std::string t;
  for (const auto& [name, lines] : m)
    for (const auto& l : lines) t += (t.empty() ? "" : "; ") + l;
  return t.empty() ? "(no collectives)" : t;
}

void check_row(const Row& r) {
  const std::string source = r.source;
  CAPTURE(source);
  const Mesh mesh = Mesh::parse(r.mesh);
  const Einsum eq = Einsum::parse(r.eq);
  const Operand a{r.a_name, Spec::parse(r.a_spec), r.a_shape}, b{r.b_name, Spec::parse(r.b_spec), r.b_shape};
  const std::optional<Spec> out = r.out ? std::optional<Spec>(Spec::parse(r.out)) : std::nullopt;
  PlanOptions options{false, r.c_name, kFloat32};
  std::optional<SearchResult> found;
  try {
    found = search_contraction(eq, mesh, a, b, out, options);
  } catch (const std::exception& e) {
    FAIL_CHECK("the planner refused the row: " << e.what());
    return;
  }
  // Article 001's rows describe its rules, which --plan article follows: that plan must be the
  // source's. The search may find fewer bytes to the same output (on these tiny tensors it slices
  // over the axis the article leaves unused, at the price of more collectives); it must never
  // send more.
  const Plan& plan = r.from == From::article ? found->article : found->best;
  CAPTURE(plan_text(plan));

  std::size_t want_total = 0;
  const PerTensor want = expected(mesh, r.want, &want_total);
  const PerTensor got = actual(plan.collectives());
  INFO("source: " << text(want));
  INFO("tool:   " << text(got));
  CHECK_MESSAGE(plan.out_spec == Spec::parse(r.want_out),
                "output: source " << Spec::parse(r.want_out).text() << ", tool " << plan.out_spec.text());
  CHECK(got == want);
  CHECK(plan.predicted_bytes_per_device() == want_total);
  CHECK(found->best.predicted_bytes_per_device() <= want_total);
  CHECK(found->best.out_spec == plan.out_spec);
}

// Shorthands for the table.
Want ag(const char* t, std::vector<std::string> axes, Shape block) {
  return {StepKind::all_gather, t, std::move(axes), std::move(block)};
}
Want ar(const char* t, std::vector<std::string> axes, Shape block) {
  return {StepKind::all_reduce, t, std::move(axes), std::move(block)};
}
Want rs(const char* t, std::vector<std::string> axes, Shape block) {
  return {StepKind::reduce_scatter, t, std::move(axes), std::move(block)};
}
Want a2a(const char* t, std::vector<std::string> axes, Shape block) {
  return {StepKind::all_to_all, t, std::move(axes), std::move(block)};
}

const char* const MM = "ik,kj->ij";  // A[I, J] . B[J, K] -> C[I, K] in the book's letters

// The table, one list per source. Comments say what the source does, in this file's words.

// The scaling book, sharding chapter.
std::vector<Row> book_sharding_rows() {
  return {
      // Case 1, first line of its list: nothing split, nothing moves, C replicated. DTensor's
      // all-Replicate strategy (test_op_strategy.py, TestCostModel.test_mm_strategies, (R, R)) agrees.
      {From::book_sharding, "book sharding.md, Case 1 (A[I,J].B[J,K] -> C[I,K]); DTensor test_mm_strategies (R,R)", MM,
       "X=4", "A", "_,_", {8, 8}, "B", "_,_", {8, 8}, "C", nullptr, "_,_", {}},
      // Case 1, third line: only B's free dim split; C keeps B's split and nothing else. The learner's
      // `--a-spec _,_ --b-spec _,Y --shape 8,16,8` on X=2,Y=4: nothing is split over X. DTensor's
      // (R, S(1)) -> S(1) in test_mm_strategies is the 1-D form.
      {From::book_sharding, "book sharding.md, Case 1 (A[I,J].B[J,K_Y] -> C[I,K_Y]); a learner's third command", MM,
       "X=2,Y=4", "A", "_,_", {8, 16}, "B", "_,Y", {16, 8}, "C", nullptr, "_,Y", {}},
      // Case 1's lemma example (and problem 6's third bullet, "standard for inference"): each
      // operand's free dim on its own axis, C split on both, no communication.
      {From::book_sharding, "book sharding.md, Case 1 lemma (A[I_X,J].B[J,K_Y] -> C[I_X,K_Y]); problem 6, 3rd bullet", MM,
       "X=2,Y=4", "A", "X,_", {8, 16}, "B", "_,Y", {16, 8}, "C", nullptr, "X,Y", {}},
      // "Computation With Sharded Arrays": A[I_X,J].B[J,K] wanted as C[I,K] means copying A or C
      // to every device, whichever is cheaper. With J small (4) A's block is the smaller: gather A.
      {From::book_sharding, "book sharding.md, Computation With Sharded Arrays / Case 2 (gather A before the matmul)", MM,
       "X=4", "A", "X,_", {8, 4}, "B", "_,_", {4, 16}, "C", "_,_", "_,_", {ag("A", {"X"}, {2, 4})}},
      // The same with J large (16) and K small (4): gathering the product after the matmul is cheaper
      // (the book: for a non-contracting split the gather may come before or after).
      {From::book_sharding, "book sharding.md, Case 2 (gather the non-contracting split after the matmul)", MM,
       "X=4", "A", "X,_", {8, 16}, "B", "_,_", {16, 4}, "C", "_,_", "_,_", {ag("C", {"X"}, {2, 4})}},
      // Case 2: A's contracting dim split, B replicated: AllGather A over X, multiply, C replicated.
      // (Problem 4's Strategy 1; J = 16 < 2K keeps it the cheaper of the two strategies.)
      {From::book_sharding, "book sharding.md, Case 2 (A[I,J_X].B[J,K] -> C[I,K]: AllGather_X A)", MM,
       "X=4", "A", "_,X", {8, 16}, "B", "_,_", {16, 16}, "C", nullptr, "_,_", {ag("A", {"X"}, {8, 4})}},
      // Case 3: both contracting dims split over X: local product, partial over X, AllReduce_X to a
      // replicated C. Case 1A as a learner types it (`--a-spec _,X --b-spec X,_ --shape 8,16,8` on
      // X=2,Y=4): an AllReduce of the 8x8 product over X's 2 devices.
      {From::book_sharding, "book sharding.md, Case 3 (AllReduce_X C[I,K]{U_X}); a learner's Case 1A command", MM,
       "X=2,Y=4", "A", "_,X", {8, 16}, "B", "X,_", {16, 8}, "C", nullptr, "_,_", {ar("C", {"X"}, {8, 8})}},
      // Case 3 with the sum left unreduced, C[I,K]{U_X} (the book's .LOCAL product). DTensor gives
      // the same: mm(Shard(1), Shard(0)) -> Partial with no redistribution (test_op_strategy.py
      // test_mm_strategies; test_matrix_ops.py test_addmm_auto_redistribute and test_t_partial).
      {From::book_sharding, "book sharding.md, Case 3 (.LOCAL -> C[I,K]{U_X}); DTensor test_mm_strategies (S(1),S(0)) -> Partial", MM,
       "X=4", "A", "_,X", {8, 16}, "B", "X,_", {16, 8}, "C", "_,_{X}", "_,_{X}", {}},
      // Case 4: both free dims on X. The book offers gathering either operand; article 001's rule
      // (and shardlab's natural output) keeps A's split and gathers B. B is the smaller here.
      {From::book_sharding, "book sharding.md, Case 4, second choice (AllGather_X B -> C[I_X,K])", MM,
       "X=4", "A", "X,_", {32, 8}, "B", "_,X", {8, 8}, "C", nullptr, "X,_", {ag("B", {"X"}, {8, 2})}},
      // Case 4, the book's first choice, asked for by its output C[I, K_X]: gather A.
      {From::book_sharding, "book sharding.md, Case 4, first choice (AllGather_X A -> C[I,K_X])", MM,
       "X=4", "A", "X,_", {8, 8}, "B", "_,X", {8, 32}, "C", "_,X", "_,X", {ag("A", {"X"}, {2, 8})}},
      // "A quick aside: how would we describe this in code?": mesh (4, 2) named X, Y; A P('X','Y'),
      // B P(None,'Y'), out_shardings P('X','Y'); shapes [8,2048] and [2048,8192] scaled to [8,64],
      // [64,128]. A's contracting dim is split over Y and B's is not (Case 2): gather A over Y.
      {From::book_sharding, "book sharding.md, 'how would we describe this in code' (einsum BD,DF->BF, out P('X','Y'))", MM,
       "X=4,Y=2", "A", "X,Y", {8, 64}, "B", "_,Y", {64, 128}, "C", "X,Y", "X,Y", {ag("A", {"Y"}, {2, 32})}},
      // Problem 4, Strategy 2: A[B,D] replicated, B[D_X,F]; multiply local shards (A sliced for
      // free) and AllReduce_X C[B,F]{U_X}. With D large (64) against B, F (8) it is the cheaper one,
      // as the answer says it is for large models.
      {From::book_sharding, "book sharding.md, problem 4 [matmul strategies], Strategy 2 (AllReduce_X C)", MM,
       "X=4", "A", "_,_", {8, 64}, "B", "X,_", {64, 8}, "C", nullptr, "_,_", {ar("C", {"X"}, {8, 8})}},
      // Problem 6: A[I_X,J_Y].B[J_Y,K] -> C[I_X,K] on a 4x4: contracting dims on Y in both (Case 3),
      // I on X kept: AllReduce_Y of the [I/4, K] product.
      {From::book_sharding, "book sharding.md, problem 6 (A[I_X,J_Y].B[J_Y,K] -> C[I_X,K], AllReduce_Y)", MM,
       "X=4,Y=4", "A", "X,Y", {16, 16}, "B", "Y,_", {16, 8}, "C", nullptr, "X,_", {ar("C", {"Y"}, {4, 8})}},
      // Problem 6, second bullet (data + tensor + ZeRO sharding): A[I_X,J].B[J_X,K_Y] -> C[I_X,K_Y]:
      // B's contracting dim is split and A's cannot take X (its I holds it): AllGather_X B.
      {From::book_sharding, "book sharding.md, problem 6, 2nd bullet (A[I_X,J].B[J_X,K_Y] -> C[I_X,K_Y], AllGather_X B)",
       MM, "X=4,Y=4", "A", "X,_", {16, 16}, "B", "X,Y", {16, 16}, "C", nullptr, "X,Y", {ag("B", {"X"}, {4, 4})}},
      // Problem 9, part 2: A[I,J_X].B[J,K] leaving C sharded instead of replicated: multiply the
      // local shards and ReduceScatter onto I, [N,K]{U_X} -> [N_X,K]. J large (64) against K (8):
      // cheaper than gathering A (part 3: the ratio is M/K).
      {From::book_sharding, "book sharding.md, problem 9, part 2 (ReduceScatter_X onto I)", MM,
       "X=4", "A", "_,X", {8, 64}, "B", "_,_", {64, 8}, "C", "X,_", "X,_", {rs("C", {"X"}, {8, 8})}},
      // Two axes on one dim, as the notation section and its pop quiz write A[I_XY, J] (mesh
      // {X: 2, Y: 8, Z: 2}): with no contracting split (Case 1) C keeps I_XY and Z stays a replica.
      {From::book_sharding, "book sharding.md, notation pop quiz mesh + Case 1 lemma (A[I_XY,J].B[J,K] -> C[I_XY,K])", MM,
       "X=2,Y=8,Z=2", "A", "(X,Y),_", {32, 8}, "B", "_,_", {8, 8}, "C", nullptr, "(X,Y),_", {}},
      // Case 3 over two axes at once: J split over (X,Y) in both; one AllReduce over the 8 devices
      // of X and Y (the book reduces and gathers over several axes as one collective, "What happens
      // when we AllGather over multiple axes?").
      {From::book_sharding, "book sharding.md, Case 3 over axes XY (AllReduce_XY)", MM,
       "X=2,Y=4", "A", "_,(X,Y)", {4, 32}, "B", "(X,Y),_", {32, 4}, "C", nullptr, "_,_", {ar("C", {"X", "Y"}, {4, 4})}},
  };
}

// The scaling book, training chapter.
std::vector<Row> book_training_rows() {
  return {
      // Data parallelism, forward step 1: Tmp[B_X,F] = In[B_X,D] *_D W_in[D,F], no communication.
      // DTensor's (S(0), R) -> S(0) (test_mm_strategies) is the same row.
      {From::book_training, "book training.md, Data Parallelism, forward 1 (no comms); DTensor test_mm_strategies (S(0),R)",
       "bd,df->bf", "X=4", "In", "X,_", {16, 8}, "W_in", "_,_", {8, 16}, "Tmp", nullptr, "X,_", {}},
      // Data parallelism, backward 2-3: dW_out[F,D]{U_X} = Tmp[B_X,F] *_B dOut[B_X,D], AllReduce.
      {From::book_training, "book training.md, Data Parallelism, backward 2-3 (AllReduce dW_out)", "bf,bd->fd", "X=4",
       "Tmp", "X,_", {32, 8}, "dOut", "X,_", {32, 4}, "dW_out", nullptr, "_,_", {ar("dW_out", {"X"}, {8, 4})}},
      // FSDP, forward 1-2: W_in[D,F] = AllGather(W_in[D_X,F]), then the DP product; batch large
      // against the weight, the regime FSDP is for.
      {From::book_training, "book training.md, FSDP, forward 1-2 (AllGather W_in)", "bd,df->bf", "X=4", "In", "X,_",
       {32, 8}, "W_in", "X,_", {8, 16}, "Tmp", nullptr, "X,_", {ag("W_in", {"X"}, {2, 16})}},
      // FSDP, forward 3-4: W_out[F, D_X] is split on its free dim D, on the axis of Tmp's batch
      // (book Case 4): AllGather W_out, Out[B_X, D].
      {From::book_training, "book training.md, FSDP, forward 3-4 (AllGather W_out)", "bf,fd->bd", "X=4", "Tmp", "X,_",
       {32, 16}, "W_out", "_,X", {16, 8}, "Out", nullptr, "X,_", {ag("W_out", {"X"}, {16, 2})}},
      // FSDP, backward 6-7: dW_in[D,F]{U_X} = dTmp *_B In, then ReduceScatter to dW_in[D_X,F] (the
      // book's "More about the ReduceScatter" too: keep the sum scattered instead of replicated).
      {From::book_training, "book training.md, FSDP, backward 6-7 (ReduceScatter dW_in)", "bd,bf->df", "X=4", "In",
       "X,_", {32, 8}, "dTmp", "X,_", {32, 16}, "dW_in", "X,_", "X,_", {rs("dW_in", {"X"}, {8, 16})}},
      // Tensor parallelism, forward 1-2: In[B,D] = AllGather(In[B,D_Y]), Tmp[B,F_Y] with no more
      // comms. Weights (16x64) larger than activations (8x16), as the section assumes.
      {From::book_training, "book training.md, Tensor Parallelism, forward 1-2 (AllGather In)", "bd,df->bf", "Y=4", "In",
       "_,Y", {8, 16}, "W_in", "_,Y", {16, 64}, "Tmp", nullptr, "_,Y", {ag("In", {"Y"}, {8, 4})}},
      // Tensor parallelism, forward 3-4: Out[B,D]{U_Y} = Tmp[B,F_Y] *_F W_out[F_Y,D], then
      // ReduceScatter to Out[B,D_Y].
      {From::book_training, "book training.md, Tensor Parallelism, forward 3-4 (ReduceScatter Out)", "bf,fd->bd", "Y=4",
       "Tmp", "_,Y", {8, 64}, "W_out", "Y,_", {64, 16}, "Out", "_,Y", "_,Y", {rs("Out", {"Y"}, {8, 16})}},
      // Mixed FSDP + TP, forward 1-3: AllGather_Y In[B_X,D_Y] and AllGather_X W_in[D_X,F_Y], then
      // Tmp[B_X,F_Y].
      {From::book_training, "book training.md, Mixed FSDP and Tensor Parallelism, forward 1-3", "bd,df->bf", "X=2,Y=4",
       "In", "X,Y", {16, 16}, "W_in", "X,Y", {16, 32}, "Tmp", nullptr, "X,Y",
       {ag("In", {"Y"}, {8, 4}), ag("W_in", {"X"}, {8, 8})}},
      // Mixed FSDP + TP, forward 4-6: AllGather_X W_out[F_Y,D_X], Out[B_X,D]{U_Y}, ReduceScatter_Y
      // to Out[B_X,D_Y].
      {From::book_training, "book training.md, Mixed FSDP and Tensor Parallelism, forward 4-6", "bf,fd->bd", "X=2,Y=4",
       "Tmp", "X,Y", {16, 32}, "W_out", "Y,X", {32, 16}, "Out", "X,Y", "X,Y",
       {ag("W_out", {"X"}, {8, 8}), rs("Out", {"Y"}, {8, 16})}},
  };
}

// Article 001 (pjit tensor parallelism).
std::vector<Row> article_rows() {
  return {
      // Case 1A: 4x16 by 16x4 on the 2x4 mesh, inner dims on Y in both; multiply the 4x4 blocks and
      // AllReduce over Y so that every device holds all of C. (By the same ring formulas, slicing I
      // over the idle X first, all-reducing the half block over Y and gathering I back over X sends
      // 48 + 32 = 80 B in two collectives; the article, like JAX and DTensor, does the one AllReduce.)
      {From::article, "article 001, Case 1A: Mesh-axes match (multiply, AllReduce over Y)", MM, "X=2,Y=4", "A", "_,Y",
       {4, 16}, "B", "Y,_", {16, 4}, "C", nullptr, "_,_", {ar("C", {"Y"}, {4, 4})}},
      // Case 1B: A's inner dim on Y, B's on X; the article restores both full matrices with
      // AllGathers and multiplies, every device holding all of C. (Not the fewest bytes: gathering
      // only B over X, 128 B, and all-reducing the partial sum over Y, 96 B, is already 224 B.)
      {From::article, "article 001, Case 1B: Mesh-axes mismatch (AllGather A over Y and B over X)", MM, "X=2,Y=4", "A",
       "_,Y", {4, 16}, "B", "X,_", {16, 4}, "C", nullptr, "_,_", {ag("A", {"Y"}, {4, 4}), ag("B", {"X"}, {8, 4})}},
      // Full Sharding: A (X, Y), B (X, Y): gather each inner dim (A over Y, B over X) and C comes out
      // (X, Y) like its inputs. (By the formulas an AllToAll of B onto its inner dim after the
      // gather over X, then a ReduceScatter of the product over Y, sends 32 + 48 + 24 = 104 B.)
      {From::article, "article 001, Full Sharding (AllGather A over Y, B over X; C (X, Y))", MM, "X=2,Y=4", "A", "X,Y",
       {4, 16}, "B", "X,Y", {16, 4}, "C", nullptr, "X,Y", {ag("A", {"Y"}, {2, 4}), ag("B", {"X"}, {8, 1})}},
      // GSPMD FFN, Embed -> Hidden: x b_x S m_y, W_in m_x h_y; gather x along Y and W_in along X,
      // h comes out b_x S h_y. Shapes (8, 512, 5120) and (5120, 20480) scaled to (4, 2, 8), (8, 16).
      {From::article, "article 001, GSPMD's sharding spec, Embed -> Hidden", "bsm,mh->bsh", "X=2,Y=4", "x", "X,_,Y",
       {4, 2, 8}, "W_in", "X,Y", {8, 16}, "h", nullptr, "X,_,Y", {ag("x", {"Y"}, {2, 2, 2}), ag("W_in", {"X"}, {4, 4})}},
  };
}

// PyTorch DTensor.
std::vector<Row> dtensor_rows() {
  return {
      // A learner's fourth command: einsum bmk,bkn->bmn with b split over X in both; the batch
      // strategy of _einsum_strategy.py keeps Shard(b) on the output, no redistribution.
      {From::dtensor, "DTensor _einsum_strategy.py gen_einsum_strategies (batch dim); a learner's einsum command",
       "bmk,bkn->bmn", "X=2,Y=4", "A", "X,_,_", {4, 8, 16}, "B", "X,_,_", {4, 16, 16}, "C", nullptr, "X,_,_", {}},
      // B replicated: the batch strategy still wins, because moving B from Replicate to Shard(0)
      // costs nothing (_collective_utils.py redistribute_cost returns 0 for a replicated source);
      // the output is Shard(b) and nothing is sent.
      {From::dtensor, "DTensor _einsum_strategy.py batch strategy + _collective_utils.py redistribute_cost (R -> S free)",
       "bmk,bkn->bmn", "X=2,Y=4", "A", "X,_,_", {4, 8, 16}, "B", "_,_,_", {4, 16, 16}, "C", nullptr, "X,_,_", {}},
      // test_matrix_ops.py test_aten_linear: x Replicate [1, 47, 2048], w Shard(0) [2048, 2048]
      // (linear multiplies by w transposed, so dim 0 of w is the output feature): out Shard(2).
      // Scaled to [1, 4, 16] and [16, 16].
      {From::dtensor, "DTensor test_matrix_ops.py test_aten_linear (R . Shard(0) weight -> Shard(2))", "bsk,nk->bsn",
       "X=4", "x", "_,_,_", {1, 4, 16}, "w", "X,_", {16, 16}, "out", nullptr, "_,_,X", {}},
      // test_matrix_ops.py test_matmul: x Replicate [8, 128], A Shard(0) [128, 128]. The zero-cost
      // strategy slices x (Shard(1)) and leaves the product Partial; full_tensor() all-reduces it.
      {From::dtensor, "DTensor test_matrix_ops.py test_matmul (R . Shard(0) -> Partial, full_tensor all_reduce)", MM,
       "X=4", "x", "_,_", {8, 128}, "A", "X,_", {128, 128}, "y", nullptr, "_,_", {ar("y", {"X"}, {8, 128})}},
      // test_tp_examples.py _test_mlp_training_e2e, MLPModule (Linear(10,16), relu, Linear(16,10)) on
      // 4 devices, input [8, 10]. net1 ColwiseParallel: weight [16, 10] Shard(0), input Replicate,
      // output Shard(-1), no communication.
      {From::dtensor, "DTensor test_tp_examples.py test_mlp_training, net1 ColwiseParallel", "bk,nk->bn", "X=4", "x",
       "_,_", {8, 10}, "W1", "X,_", {16, 10}, "h", nullptr, "_,X", {}},
      // net2 RowwiseParallel: input Shard(-1), weight [10, 16] Shard(1), output Replicate: one
      // all_reduce (the test counts all_reduce == 1 over forward and backward).
      {From::dtensor, "DTensor test_tp_examples.py test_mlp_training, net2 RowwiseParallel (all_reduce == 1)", "bk,nk->bn",
       "X=4", "h", "_,X", {8, 16}, "W2", "_,X", {10, 16}, "y", nullptr, "_,_", {ar("y", {"X"}, {8, 10})}},
      // Sequence parallel, net1 ColwiseParallel(input_layouts=Shard(0)): the layer wants its input
      // Replicate (style.py), so the [8, 10] input split on dim 0 is all-gathered; output Shard(-1).
      {From::dtensor, "DTensor test_tp_examples.py test_mlp_training is_seq_parallel, net1 (all_gather of the input)",
       "bk,nk->bn", "X=4", "x", "X,_", {8, 10}, "W1", "X,_", {16, 10}, "h", "_,X", "_,X", {ag("x", {"X"}, {2, 10})}},
      // Sequence parallel, net2 RowwiseParallel(output_layouts=Shard(0)): the Partial product is
      // reduce-scattered onto dim 0 (the test counts reduce_scatter == 1).
      {From::dtensor, "DTensor test_tp_examples.py test_mlp_training is_seq_parallel, net2 (reduce_scatter == 1)",
       "bk,nk->bn", "X=4", "h", "_,X", {8, 16}, "W2", "_,X", {10, 16}, "y", "X,_", "X,_", {rs("y", {"X"}, {8, 10})}},
      // test_matrix_ops.py test_dtensor_mm on a (2, 2) mesh: lhs [Shard(0), Replicate()], rhs
      // [Replicate(), Shard(1)]: per mesh dim the lhs-free and rhs-free strategies, no redistribution;
      // the output is [Shard(0), Shard(1)]. [256,128] x [128,256] scaled to [16,8] x [8,16].
      {From::dtensor, "DTensor test_matrix_ops.py test_dtensor_mm (2-D mesh, [S(0),R] . [R,S(1)] -> [S(0),S(1)])", MM,
       "X=2,Y=2", "A", "X,_", {16, 8}, "B", "_,Y", {8, 16}, "C", nullptr, "X,Y", {}},
      // Both mesh dims on the batch dim ([Shard(0), Shard(0)], i.e. b over (X,Y)) in both bmm
      // operands: the batch strategy on each mesh dim (test_op_strategy.py test_bmm_2d_mesh lists
      // these products), output [Shard(0), Shard(0)], no communication.
      {From::dtensor, "DTensor _einsum_strategy.py batch strategy on both mesh dims; test_op_strategy.py test_bmm_2d_mesh",
       "bmk,bkn->bmn", "X=2,Y=2", "A", "(X,Y),_,_", {8, 4, 4}, "B", "(X,Y),_,_", {8, 4, 4}, "C", nullptr, "(X,Y),_,_", {}},
  };
}

std::vector<Row> rows_from(From from) {
  switch (from) {
    case From::book_sharding: return book_sharding_rows();
    case From::book_training: return book_training_rows();
    case From::article: return article_rows();
    case From::dtensor: return dtensor_rows();
  }
  return {};
}

void check_group(From from) {
  int n = 0;
  for (const Row& r : rows_from(from))
    if (r.from == from) {
      ++n;
      check_row(r);
    }
  CHECK(n > 0);
}

// A collective on its own (the book's primitives and its problems about them): one tensor moved
// from `spec` to `target` by search_reshard.
struct ReshardRow {
  const char* source;
  const char* mesh;
  const char* spec;
  Shape shape;
  const char* target;
  std::vector<Want> want;
  bool any_order;  // the source names one collective over several axes; compare kinds and total bytes
};

const std::vector<ReshardRow>& reshard_table() {
  static const std::vector<ReshardRow> rows = {
      // Pop Quiz 2 [AllGather time]: AllGather_Y([E_Y, F]) -> [E, F] on {X: 8, Y: 4}; E = 2048,
      // F = 8192 scaled to 32, 16: each device holds [8, 16] and receives the other 3 blocks.
      {"book sharding.md, Pop Quiz 2 [AllGather time]", "X=8,Y=4", "Y,_", {32, 16}, "_,_", {ag("A", {"Y"}, {8, 16})},
       false},
      // Problem 2 [AllGather latency], first part: AllGather_X([B_X, D_Y]) on a 4x4x4 mesh; D stays on Y.
      {"book sharding.md, problem 2, AllGather_X([B_X, D_Y])", "X=4,Y=4,Z=4", "X,Y", {16, 16}, "_,Y",
       {ag("A", {"X"}, {4, 4})}, false},
      // Problem 2, second part: AllGather_XY([B_X, D_Y]) -> [B, D]: (XY - 1) blocks in all, whichever
      // dim goes first (two gathers here, one per dim).
      {"book sharding.md, problem 2, AllGather_XY([B_X, D_Y])", "X=4,Y=4,Z=4", "X,Y", {16, 16}, "_,_",
       {ag("A", {"X"}, {4, 4}), ag("A", {"Y"}, {4, 4})}, true},
      // Problem 2, third part: AllReduce_Z([B_X, D_Y]{U_Z}): twice an AllGather's cost.
      {"book sharding.md, problem 2, AllReduce_Z([B_X, D_Y]{U_Z})", "X=4,Y=4,Z=4", "X,Y{Z}", {16, 16}, "X,Y",
       {ar("A", {"Z"}, {4, 4})}, false},
      // Problem 3 [latency-bound AllGather]: AllGather_X([B_X]) with B = 128 on the 4x4x4 mesh.
      {"book sharding.md, problem 3, AllGather_X([B_X])", "X=4,Y=4,Z=4", "X", {128}, "_", {ag("A", {"X"}, {32})}, false},
      // "Our final communication primitive": AllToAll_{X,J} A[I_X, J] -> A[I, J_X].
      {"book sharding.md, the AllToAll (AllToAll_{X,J} A[I_X,J] -> A[I,J_X])", "X=4", "X,_", {16, 16}, "_,X",
       {a2a("A", {"X"}, {4, 16})}, false},
      // Case 3's ReduceScatter: ReduceScatter_{Y,J} A[I_X, J]{U_Y} -> A[I_X, J_Y].
      {"book sharding.md, Case 3, ReduceScatter_{Y,J} A[I_X,J]{U_Y} -> A[I_X,J_Y]", "X=2,Y=4", "X,_{Y}", {8, 16}, "X,Y",
       {rs("A", {"Y"}, {4, 16})}, false},
  };
  return rows;
}

void check_reshard(const ReshardRow& r) {
  const std::string source = r.source;
  CAPTURE(source);
  const Mesh mesh = Mesh::parse(r.mesh);
  const Operand t{"A", Spec::parse(r.spec), r.shape};
  std::vector<const PlanStep*> moves;
  std::vector<PlanStep> steps;
  try {
    steps = search_reshard(mesh, t, Spec::parse(r.target), PlanOptions{false, "A", kFloat32});
  } catch (const std::exception& e) {
    FAIL_CHECK("the planner refused the row: " << e.what());
    return;
  }
  std::size_t got_total = 0;
  for (const auto& s : steps)
    if (s.communicates()) {
      moves.push_back(&s);
      got_total += s.predicted_bytes;
    }
  std::size_t want_total = 0;
  const PerTensor want = expected(mesh, r.want, &want_total);
  const PerTensor got = actual(moves);
  INFO("source: " << text(want));
  INFO("tool:   " << text(got));
  if (!r.any_order) {
    CHECK(got == want);
  } else {
    // The same ops over the same groups; each one's bytes depend on which goes first.
    auto kinds = [](const std::vector<const PlanStep*>& v) {
      std::vector<std::string> k;
      for (const PlanStep* s : v) k.push_back(step_kind_name(s->kind) + " over " + axes_text(s->axes));
      std::sort(k.begin(), k.end());
      return k;
    };
    std::vector<std::string> want_kinds;
    for (const auto& w : r.want) want_kinds.push_back(step_kind_name(w.kind) + " over " + axes_text(w.axes));
    std::sort(want_kinds.begin(), want_kinds.end());
    CHECK(kinds(moves) == want_kinds);
    // One AllGather over every named axis at once (AllGather_XY of a [B/4, D/4] block): each device
    // ends with all |X||Y| blocks and receives all but its own.
    std::vector<std::string> group;
    for (const auto& w : r.want) group.insert(group.end(), w.axes.begin(), w.axes.end());
    want_total = (static_cast<std::size_t>(mesh.axes_size(group)) - 1) * elements(r.want[0].block) * kFloat32;
  }
  CHECK(got_total == want_total);
}

}  // namespace

TEST_SUITE("plan search textbook") {
  TEST_CASE("scaling book, sharding chapter: cases 1-4, the code example and problems 4, 6 and 9") {
    check_group(From::book_sharding);
  }

  TEST_CASE("scaling book, training chapter: the DP, FSDP, tensor-parallel and mixed steps") {
    check_group(From::book_training);
  }

  TEST_CASE("article 001: Case 1A, Case 1B, full sharding and the GSPMD FFN") {
    check_group(From::article);
  }

  TEST_CASE("PyTorch DTensor: einsum strategies, matrix-op tests and the tensor-parallel MLP") {
    check_group(From::dtensor);
  }

  TEST_CASE("scaling book, sharding chapter: the collectives alone (pop quiz 2, problems 2-3, AllToAll, ReduceScatter)") {
    for (const auto& r : reshard_table()) check_reshard(r);
  }
}
