// Uneven blocks: core/layout.cpp's chunk and pad rules, the _v collectives
// (collectives/ring.cpp, all_to_all.cpp), harness/plan/uneven_steps.cpp, and a random differential
// test: contractions whose dims do not divide their mesh axes, planned (articles' rules and the
// search) and run on the sim backend, every result equal to the unsharded einsum (integers in
// float64: exact), every collective's bytes equal to the plan's prediction and to the ledger
// row's own formula. Expected extents and bytes are written here from torch.chunk's rule and the
// ring's arithmetic, not taken from the code under test.
// Over 400 lines (474) as one idea: uneven blocks end to end, from the cut rules to the runs.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tests/sanitized.hpp"
#include "tests/random_cases.hpp"
#include "collectives/collectives.hpp"
#include "collectives/predict.hpp"
#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "harness/check/case_file.hpp"
#include "harness/check/report.hpp"
#include "harness/check/verify.hpp"
#include "harness/plan/plan_search.hpp"
#include "harness/plan/planner.hpp"

using namespace shardlab;
using shardlab::testing::pick;
using shardlab::testing::random_mesh;
using shardlab::testing::random_spec;
using shardlab::testing::Rng;
using Sizes = std::vector<std::size_t>;

namespace {

Mesh with_rule(Mesh m, Uneven u) {
  m.set_uneven(u);
  return m;
}

// torch.chunk(d rows, n): chunks of ceil(d/n), as many as fit, the last shorter; then empty ones.
Sizes torch_chunk(std::size_t d, std::size_t n) {
  const std::size_t q = (d + n - 1) / n;
  Sizes out;
  for (std::size_t k = 0; k < n; ++k) out.push_back(k * q >= d ? 0 : std::min(q, d - k * q));
  return out;
}

Sizes extents(const Mesh& m, const std::string& spec, const Shape& g, std::size_t dim, bool stored) {
  Sizes out;
  for (int d = 0; d < m.devices(); ++d) {
    const DimBlock b = dim_block(m, Spec::parse(spec), g, dim, d);
    out.push_back(stored ? b.stored : b.stop - b.start);
  }
  return out;
}

}  // namespace

TEST_SUITE("uneven") {
  TEST_CASE("50257 vocabulary rows over 8 devices: chunk gives 7 x 6283 and 6276; pad 6283 each, 7 on the last") {
    const Mesh chunk = with_rule(Mesh::parse("X=8"), Uneven::chunk), pad = with_rule(Mesh::parse("X=8"), Uneven::pad);
    const Shape g{50257, 64};
    CHECK(extents(chunk, "X,_", g, 0, false) == Sizes{6283, 6283, 6283, 6283, 6283, 6283, 6283, 6276});
    CHECK(extents(chunk, "X,_", g, 0, true) == extents(chunk, "X,_", g, 0, false));
    CHECK(extents(pad, "X,_", g, 0, false) == Sizes{6283, 6283, 6283, 6283, 6283, 6283, 6283, 6276});
    CHECK(extents(pad, "X,_", g, 0, true) == Sizes(8, 6283));
    CHECK(block_of(pad, Spec::parse("X,_"), g, 7).text() == "[43981:50257+7, 0:64]");
    CHECK(block_of(chunk, Spec::parse("X,_"), g, 7).text() == "[43981:50257, 0:64]");
    CHECK(local_shape(pad, Spec::parse("X,_"), g) == Shape{6283, 64});
  }

  TEST_CASE("chunk follows torch.chunk on one axis and nests level by level on several") {
    for (std::size_t d : {1, 5, 9, 10, 17, 50257})
      for (int n : {1, 2, 3, 4, 8}) {
        const Mesh m = with_rule(Mesh({"X"}, {n}), Uneven::chunk);
        CHECK(extents(m, "X", {d}, 0, false) == torch_chunk(d, static_cast<std::size_t>(n)));
      }
    // (X,Y) on X=2,Y=4: 10 rows -> X blocks of 5, 5 -> each over Y as torch.chunk(5, 4) = 2,2,1,0.
    const Mesh m = with_rule(Mesh::parse("X=2,Y=4"), Uneven::chunk);
    CHECK(extents(m, "(X,Y)", {10}, 0, false) == Sizes{2, 2, 1, 0, 2, 2, 1, 0});
    // (Y,X): 10 -> Y blocks 3,3,3,1 -> each over X: 2,1 | 2,1 | 2,1 | 1,0 (device order X major).
    CHECK(extents(m, "(Y,X)", {10}, 0, false) == Sizes{2, 2, 2, 1, 1, 1, 1, 0});
    const Mesh p = with_rule(Mesh::parse("X=2,Y=4"), Uneven::pad);
    CHECK(extents(p, "(X,Y)", {10}, 0, true) == Sizes(8, 2));  // ceil(10/8) everywhere
    // Dims that divide split as before under every rule.
    for (Uneven u : {Uneven::none, Uneven::chunk, Uneven::pad})
      CHECK(extents(with_rule(Mesh::parse("X=2,Y=4"), u), "(X,Y)", {16}, 0, true) == Sizes(8, 2));
  }

  TEST_CASE("--uneven none keeps the refusal; chunk and pad accept; parse_uneven names the choices") {
    const Mesh none = Mesh::parse("X=8");
    CHECK(none.uneven() == Uneven::none);
    CHECK_THROWS_WITH(Spec::parse("X,_").validate(none, {50257, 64}, "A"),
                      "dim 0 of A (size 50257) is not divisible by mesh axis X (size 8)");
    CHECK_NOTHROW(Spec::parse("X,_").validate(with_rule(none, Uneven::chunk), {50257, 64}, "A"));
    CHECK(parse_uneven("pad") == Uneven::pad);
    CHECK(uneven_name(Uneven::chunk) == "chunk");
    try {
      parse_uneven("ragged");
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::parse);
    }
  }

  TEST_CASE("local blocks and assemble round trip; padding is zeros and never read") {
    std::mt19937_64 rng(32);
    for (int i = 0; i < 40; ++i) {
      const Uneven u = i % 2 ? Uneven::pad : Uneven::chunk;
      const Mesh m = with_rule(i % 3 ? Mesh::parse("X=2,Y=3") : Mesh::parse("X=4"), u);
      const Shape g{1 + rng() % 9, 1 + rng() % 7};
      const Spec s = Spec::parse(i % 3 ? (i % 4 ? "(Y,X),_" : "X,Y") : "_,X");
      const Tensor t = iota(g, 1);
      std::vector<Tensor> blocks;
      for (int d = 0; d < m.devices(); ++d) {
        Tensor b = local_block(t, m, s, d);
        const Block blk = block_of(m, s, g, d);
        CHECK(shape_of(b) == blk.stored_shape());
        // Padding (beyond the real extents) is zero; real values are the global ones.
        for (std::size_t r = 0; r < b.shape()[0]; ++r)
          for (std::size_t c = 0; c < b.shape()[1]; ++c) {
            const bool real = r < blk.stop[0] - blk.start[0] && c < blk.stop[1] - blk.start[1];
            CHECK(b(r, c) == (real ? t(blk.start[0] + r, blk.start[1] + c) : 0.0));
            if (!real) b(r, c) = 99;  // assemble must not read it
          }
        blocks.push_back(b);
      }
      const Assembly a = assemble(m, s, g, blocks, "T");
      CHECK(a.replicas_agree);
      CHECK(a.tensor == t);
    }
  }

  TEST_CASE("all_gather_v, reduce_scatter_v and all_to_all_v move the rows asked, bytes as the ring's arithmetic") {
    // Group X=4; member r holds counts[r] rows of 3 columns, value 100 r + 10 i + j.
    const Mesh m = Mesh::parse("X=4");
    const Sizes counts{3, 0, 2, 1};
    const std::size_t total = 6, cols = 3, eb = 8;
    Runtime rt(Backend::sim);
    const RunResult r = rt.run(m, [&](Device& dev) -> Outputs {
      const std::size_t me = static_cast<std::size_t>(dev.id());
      Tensor mine = xt::zeros<double>({counts[me], cols});
      for (std::size_t i = 0; i < counts[me]; ++i)
        for (std::size_t j = 0; j < cols; ++j) mine(i, j) = 100.0 * me + 10.0 * i + j;
      Tensor full = xt::zeros<double>({total, cols});
      for (std::size_t i = 0; i < total; ++i)
        for (std::size_t j = 0; j < cols; ++j) full(i, j) = (me + 1.0) * (10.0 * i + j);
      Tensor wide = xt::zeros<double>({cols, total});  // all_to_all: split dim 1 by counts, concat dim 0
      for (std::size_t i = 0; i < cols; ++i)
        for (std::size_t j = 0; j < total; ++j) wide(i, j) = 1000.0 * me + 10.0 * i + j;
      return {{"gathered", all_gather_v(dev, mine, {"X"}, 0, counts, "G")},
              {"scattered", reduce_scatter_v(dev, full, {"X"}, 0, counts, "S")},
              {"moved", all_to_all_v(dev, wide, {"X"}, 1, 0, counts, Sizes(4, cols), "M")}};
    });
    for (std::size_t d = 0; d < 4; ++d) {
      const Tensor& g = r.outputs[d].at("gathered");
      REQUIRE(shape_of(g) == Shape{total, cols});
      std::size_t row = 0;
      for (std::size_t k = 0; k < 4; ++k)
        for (std::size_t i = 0; i < counts[k]; ++i, ++row)
          for (std::size_t j = 0; j < cols; ++j) CHECK(g(row, j) == 100.0 * k + 10.0 * i + j);
      const Tensor& s = r.outputs[d].at("scattered");
      REQUIRE(shape_of(s) == Shape{counts[d], cols});
      std::size_t start = 0;
      for (std::size_t k = 0; k < d; ++k) start += counts[k];
      for (std::size_t i = 0; i < counts[d]; ++i)
        for (std::size_t j = 0; j < cols; ++j) CHECK(s(i, j) == 10.0 * (10.0 * (start + i) + j));  // (1+2+3+4) x
      const Tensor& mv = r.outputs[d].at("moved");
      REQUIRE(shape_of(mv) == Shape{4 * cols, counts[d]});
      for (std::size_t k = 0; k < 4; ++k)
        for (std::size_t i = 0; i < cols; ++i)
          for (std::size_t j = 0; j < counts[d]; ++j) CHECK(mv(k * cols + i, j) == 1000.0 * k + 10.0 * i + start + j);
    }
    // Ring AllGather: device r sends every block but its successor's; ReduceScatter every slice but
    // its own; AllToAll every part but its own (its part of dim 1 times 3 rows).
    for (const auto& row : r.ledger) {
      const std::size_t d = static_cast<std::size_t>(row.device);
      const std::size_t want = row.op == "all_gather" ? (total - counts[(d + 1) % 4]) * cols * eb
                                                      : (total - counts[d]) * cols * eb;
      CAPTURE(row.op);
      CAPTURE(d);
      CHECK(row.bytes_sent == want);
      // The row's own prediction from its parts, device by device (not just the busiest).
      CHECK(predicted_bytes_sent_v(row.op, row.part_bytes, row.member) == want);
    }
    for (const auto& c : summarize(r.ledger)) CHECK(c.matches());
    CHECK(summarize(r.ledger)[0].bytes_per_device == (6 - 0) * cols * eb);  // device 0's successor holds 0 rows
  }

  TEST_CASE("a ledger row's uneven parts survive serialize and deserialize (MPI ships rows to the root)") {
    LedgerRow row;
    row.op = "all_gather";
    row.part_bytes = {24, 0, 16};
    row.member = 2;
    const auto back = deserialize(serialize({row, LedgerRow{}}));
    REQUIRE(back.size() == 2);
    CHECK(back[0].part_bytes == row.part_bytes);
    CHECK(back[0].member == 2);
    CHECK(back[1].part_bytes.empty());
  }

  TEST_CASE("the planner prices uneven steps per device: gather of 50257 rows over X=8") {
    const Einsum eq = Einsum::parse("ik,kj->ij");
    for (Uneven u : {Uneven::chunk, Uneven::pad}) {
      const Mesh m = with_rule(Mesh::parse("X=8"), u);
      const Plan p = plan_contraction(eq, m, {"A", Spec::parse("X,_"), {50257, 64}}, {"B", Spec::parse("_,_"), {64, 32}},
                                      Spec::parse("_,_"), {false, "C", 4});
      REQUIRE(p.collectives().size() == 1);
      // chunk: device 6 sends all but device 7's 6276 rows: 43981 rows of C's 32 float32 columns;
      // pad: every device sends 7 padded blocks of 6283 rows.
      CHECK(p.collectives()[0]->predicted_bytes == (u == Uneven::chunk ? 43981u : 7u * 6283u) * 32 * 4);
    }
  }
}

namespace {

struct Tally {
  int cases = 0, uneven_steps = 0, padded = 0;
  std::map<std::string, int> ops;
};

// One contraction with dims of 1 to 11 (most do not divide), planned and run.
void run_case(Rng& rng, Tally& tally) {
  static const char* equations[] = {"ik,kj->ij", "bsm,mh->bsh", "bik,bkj->bij", "ij,j->i", "ik,jk->ij"};
  const Einsum eq = Einsum::parse(equations[pick(rng, 0, 4)]);
  const Uneven rule = pick(rng, 0, 1) ? Uneven::pad : Uneven::chunk;
  const Mesh mesh = with_rule(random_mesh(rng), rule);
  const Spec sa = random_spec(rng, mesh, eq.a.size()), sb = random_spec(rng, mesh, eq.b.size());
  std::optional<Spec> so;
  if (pick(rng, 0, 1)) so = random_spec(rng, mesh, eq.out.size());
  DimSizes sizes;
  for (char c : eq.a + eq.b) sizes[c] = static_cast<std::size_t>(pick(rng, 1, 11));
  const Operand a{"A", sa, shape_for(eq.a, sizes)}, b{"B", sb, shape_for(eq.b, sizes)};
  const PlanOptions opt{false, "C", 8};
  const bool search = pick(rng, 0, 1);
  CAPTURE(mesh.text());
  CAPTURE(uneven_name(rule));
  CAPTURE(eq.text());
  CAPTURE(sa.text());
  CAPTURE(sb.text());
  CAPTURE(so ? so->text() : "natural");
  CAPTURE(shape_text(a.shape));
  CAPTURE(shape_text(b.shape));
  Plan plan;
  try {
    plan = search ? search_contraction(eq, mesh, a, b, so, opt).best : plan_contraction(eq, mesh, a, b, so, opt);
  } catch (const Error& e) {
    // The articles' rules cannot reach every output; the search can (it is tried as well).
    REQUIRE_MESSAGE(e.kind() == ErrorKind::unsupported, e.what());
    return;
  }
  CAPTURE(plan_summary(plan));
  const std::uint64_t seed = rng();
  const Tensor ta = random_integers(a.shape, seed, -5, 5), tb = random_integers(b.shape, seed + 1, -5, 5);
  Runtime rt(Backend::sim);
  const RunResult r = rt.run(mesh, plan_spmd(plan, ta, tb));
  std::vector<Tensor> blocks;
  for (const auto& o : r.outputs) blocks.push_back(o.at("C"));
  const Assembly got = assemble(mesh, plan.out_spec, plan.out_shape, blocks, "C");
  // Small integers in float64: every sum is exact in any order, so the check is bit for bit.
  const Verdict v = compare("C", got.tensor, reference_einsum(eq, ta, tb), 0.0);
  CHECK_MESSAGE(v.pass, v.line());
  CHECK_MESSAGE(got.replicas_agree, got.disagreement);
  // Padding stays zero (so it never changes a sum the next op takes).
  for (int d = 0; d < mesh.devices(); ++d) {
    const Block blk = block_of(mesh, plan.out_spec, plan.out_shape, d);
    if (!blk.padded()) continue;
    ++tally.padded;
    // local_block pads with zeros the real values assemble() read: the block as it should be.
    CHECK(blocks[static_cast<std::size_t>(d)] == local_block(got.tensor, mesh, plan.out_spec, d));
  }
  const auto summary = summarize(r.ledger);
  CHECK(plan_vs_ledger(plan, summary) == "");
  for (const auto& c : summary) CHECK_MESSAGE(c.matches(), std::string(c.op + " of " + c.tensor));
  ++tally.cases;
  for (const auto& s : plan.steps) {
    if (s.kind == StepKind::contract) continue;
    ++tally.ops[step_kind_name(s.kind)];
    tally.uneven_steps += s.kind != StepKind::all_reduce &&
                          (s.global.empty() ? false : !is_even(mesh, s.before, s.global) || !is_even(mesh, s.after, s.global));
  }
}

}  // namespace

TEST_SUITE("uneven") {
  TEST_CASE("random uneven contractions (chunk and pad) on random meshes equal the unsharded einsum, bytes as planned") {
    Rng rng(32032);
    Tally t;
    const int n = shardlab::testing::sanitized_share(400, 4);  // tests/sanitized.hpp
    for (int i = 0; i < n; ++i) run_case(rng, t);
    MESSAGE("cases run: " << t.cases << ", steps on uneven layouts: " << t.uneven_steps << ", padded result blocks: "
                          << t.padded << ", all_gather " << t.ops["all_gather"] << ", reduce_scatter "
                          << t.ops["reduce_scatter"] << ", all_to_all " << t.ops["all_to_all"] << ", local_slice "
                          << t.ops["local_slice"] << ", all_reduce " << t.ops["all_reduce"]);
    // At least these many of each in 400 cases (a quarter of them in 100).
    const int q = 400 / n;
    CHECK(t.cases > 300 / q);
    CHECK(t.uneven_steps > 200 / q);
    CHECK(t.padded > 50 / q);
    CHECK(t.ops["all_gather"] > 50 / q);
    // ReduceScatters come from the half of the cases with an output spec (a natural output is
    // completed by AllReduce): 26 in the 400, 5 in the sanitizers' 100.
    CHECK(t.ops["reduce_scatter"] >= 20 / q);
    CHECK(t.ops["local_slice"] > 10 / q);
    CHECK(t.ops["all_to_all"] > 5 / q);
  }
}

#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"

TEST_SUITE("uneven") {
  // An output test (tests/sanitized.hpp: skipped by ThreadSanitizer's suite).
  TEST_CASE("shardlab matmul 50257,64,32 on X=8 passes with --uneven chunk and pad and prints the blocks" *
            doctest::skip(shardlab::testing::kThreadSanitized)) {
    using shardlab::testing::run_binary;
    const std::string cmd = "shardlab matmul --mesh X=8 --a-spec X,_ --b-spec _,_ --shape 50257,64,32";
    auto chunk = run_binary(cmd + " --uneven chunk");
    CHECK(chunk.status == 0);
    CHECK(chunk.out.find("A dim I: 50257 rows over X in 8 blocks: 6283 rows x 7, 6276 x 1") != std::string::npos);
    CHECK(chunk.out.find("PASS matmul") != std::string::npos);
    auto pad = run_binary(cmd + " --uneven pad");
    CHECK(pad.status == 0);
    CHECK(pad.out.find("A dim I: 50257 rows over X in 8 blocks: 6283 rows each, padding 0 x 7, 7 x 1 (7 of 50264)") != std::string::npos);
    auto none = run_binary(cmd + " --uneven none");
    CHECK(none.status == 2);
    CHECK(none.err.find("dim 0 of A (size 50257) is not divisible by mesh axis X (size 8)") != std::string::npos);
    // Gathering the result: the busiest device's bytes are the plan's and the formula's
    // (chunk: all rows but device 7's 6276, x 32 float32 columns).
    auto j = run_binary(cmd + " --out-spec _,_ --json");
    REQUIRE(j.status == 0);
    const auto r = nlohmann::json::parse(j.out);
    REQUIRE(r["collectives"].size() == 1);
    CHECK(r["collectives"][0]["bytes_per_device"] == (50257 - 6276) * 32 * 4);
    CHECK(r["collectives"][0]["predicted_bytes_per_device"] == (50257 - 6276) * 32 * 4);
    CHECK(r["uneven"] == "chunk");
  }

}

TEST_SUITE("uneven") {
  TEST_CASE("--inject on uneven blocks: a planted fault is caught; one with nothing to change is not planted") {
    using shardlab::testing::run_binary;
    for (const char* rule : {"chunk", "pad"}) {
      CAPTURE(rule);
      const std::string base = std::string("shardlab matmul --mesh X=4 --uneven ") + rule;
      for (const char* inj : {"stale-receive", "gather-offset", "perturb:1e-3"}) {
        CAPTURE(inj);
        auto r = run_binary(base + " --a-spec X,_ --b-spec _,_ --shape 10,4,3 --out-spec _,_ --json --inject " + inj);
        CHECK(r.status == 1);
        CHECK(nlohmann::json::parse(r.out)["injected_struck"] == 1);
      }
      auto r = run_binary(base + " --a-spec _,X --b-spec X,_ --shape 5,10,3 --out-spec X,_ --quiet --inject skip-add");
      CHECK(r.status == 1);
      // AllToAll onto 9 columns over 4: device 3 (the one faults strike) receives nothing but empty
      // or zero parts, so swapping two of them would change nothing: not planted, and said so (and
      // not a success: exit 1).
      auto s = run_binary(base + " --a-spec X,_ --b-spec _,_ --shape 9,9,9 --out-spec _,X --json --inject swap-blocks");
      CHECK(s.status == 1);
      CHECK(nlohmann::json::parse(s.out)["injected_struck"] == 0);
    }
  }
}

TEST_SUITE("uneven") {
  TEST_CASE("case file uneven = \"chunk\": 12 heads on Y=8, attention forward and backward verified; heads listed") {
    using shardlab::testing::run_binary;
    const std::string file = "harness/cases/attention_12_heads.toml";
    auto plan = run_binary("shardlab run " + file + " --plan-only");
    CHECK(plan.status == 0);
    // torch.chunk(12 heads, 8): ceil(12/8) = 2 each for devices 0-5, none for 6 and 7.
    CHECK(plan.out.find("dim n (12) over Y, first in W_q:\n    d0 0:2, d1 2:4, d2 4:6, d3 6:8, d4 8:10, d5 10:12, d6 "
                        "none, d7 none") != std::string::npos);
    auto run = run_binary("shardlab run " + file + " --json");
    REQUIRE(run.status == 0);
    const auto j = nlohmann::json::parse(run.out);
    CHECK(j["pass"] == true);
    // y and dx, [2, 4, 16] float32 = 512 B each; ring AllReduce over 8: 2 x 7/8 x 512 = 896 B.
    REQUIRE(j["collectives"].size() == 2);
    for (const auto& c : j["collectives"]) CHECK(c["bytes_per_device"] == 896);
    auto bad = run_binary("shardlab run " + file + " --inject perturb:1e-3 --quiet");
    CHECK(bad.status == 1);
  }

  TEST_CASE("case file uneven: chunk and pad accepted, unknown values refused in one sentence naming all three") {
    const std::string base = "name = \"u\"\nmesh = \"Y=8\"\ndims = { a = 12 }\ninputs = { x = \"a\" }\n"
                             "shard = { x = \"Y\" }\nops = [ { out = \"y\", op = \"scale\", in = [\"x\"], value = 2.0 } ]\n"
                             "outputs = [\"y\"]\n";
    try {
      parse_case_file(base + "uneven = \"padded\"\n", "u.toml");
      FAIL("padded accepted");
    } catch (const Error& e) {
      const std::string what = e.what();
      CHECK(what.find("u.toml:8: uneven is \"padded\"") != std::string::npos);
      for (const char* mode : {"\"chunk\"", "\"pad\"", "\"none\""}) CHECK(what.find(mode) != std::string::npos);
    }
    CHECK(parse_case_file(base + "uneven = \"pad\"\n", "u.toml").uneven == "pad");
    CHECK(parse_case_file(base + "uneven = \"chunk\"\n", "u.toml").uneven == "chunk");
    CHECK(parse_case_file(base + "uneven = \"none\"\n", "u.toml").uneven == "none");
    CHECK(parse_case_file(base, "u.toml").uneven == "chunk");  // as matmul, einsum and the lessons
  }
}

#include <fstream>
#include <unistd.h>

#include "core/text.hpp"
#include "harness/check/plan_ledger.hpp"

TEST_SUITE("uneven") {
  TEST_CASE("shipped programs with dims that do not divide (uneven = \"chunk\" and \"pad\"): layer norms, softmax, "
            "sequence parallel, forward and backward, verified; a perturbation caught" *
            doctest::skip(shardlab::testing::kThreadSanitized)) {  // an output test (tests/sanitized.hpp)
    using shardlab::testing::run_binary;
    struct Variant {
      const char* file;
      const char* dims;  // the shipped dims line, and what replaces it
      const char* uneven_dims;
      const char* mode;  // pad: the layer norms and the bias adds run on real rows only
    };
    const Variant variants[] = {
        {"transformer_sequence_parallel", "dims = { b = 2, s = 8, t = 8, m = 16, n = 8, d = 4, h = 64 }",
         "dims = { b = 2, s = 7, t = 7, m = 18, n = 6, d = 4, h = 50 }", "pad"},
        {"transformer_megatron", "dims = { b = 2, s = 8, t = 8, m = 16, n = 8, d = 4, h = 64 }",
         "dims = { b = 3, s = 7, t = 7, m = 18, n = 6, d = 4, h = 50 }", "chunk"},  // n and h over (X,Y) = 8
        {"gspmd_ffn_backward", "dims = { b = 8, s = 4, m = 16, h = 64 }", "dims = { b = 7, s = 3, m = 14, h = 50 }",
         "pad"},
    };
    // Under a sanitizer (tests/sanitized.hpp) the first only: it has the layer norms and softmax,
    // and runs the same shardlab run path as the others.
    const int count = shardlab::testing::sanitized_share(3, 3);
    for (const auto& v : variants) {
      if (&v - variants >= count) break;
      CAPTURE(v.file);
      std::string text = read_text_file(std::string("harness/cases/") + v.file + ".toml", "case");
      const auto at = text.find(v.dims);
      REQUIRE(at != std::string::npos);
      text.replace(at, std::string(v.dims).size(), std::string(v.uneven_dims) + "\nuneven = \"" + v.mode + "\"");
      text = text.substr(0, text.find("[expect]"));  // the shipped sizes' byte counts no longer hold
      const std::string path = "/tmp/shardlab_uneven_" + std::to_string(::getpid()) + "_" + v.file + ".toml";
      std::ofstream(path) << text;
      auto plan = run_binary("shardlab run " + path + " --plan-only");
      CHECK(plan.out.find("Uneven blocks (uneven = \"" + std::string(v.mode) + "\"") != std::string::npos);
      auto ok = run_binary("shardlab run " + path + " --quiet");
      CHECK(ok.status == 0);
      CHECK(ok.out.rfind("PASS", 0) == 0);
      auto bad = run_binary("shardlab run " + path + " --quiet --inject perturb:1e-3");
      CHECK(bad.status == 1);
      std::remove(path.c_str());
    }
  }

  TEST_CASE("a roll along a split dim that does not divide is refused in one sentence (blocks would misalign)") {
    using shardlab::testing::run_binary;
    std::string text = read_text_file("harness/cases/attention_ring_step.toml", "case");
    const auto at = text.find("t = 8");
    REQUIRE(at != std::string::npos);
    text.replace(at, 5, "t = 7");
    text = text.substr(0, text.find("[expect]")) + "uneven = \"pad\"\n";
    const std::string path = "/tmp/shardlab_uneven_roll_" + std::to_string(::getpid()) + ".toml";
    std::ofstream(path) << text;
    auto r = run_binary("shardlab run " + path + " --quiet");
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("a roll moves whole blocks, and 4 does not divide 7") != std::string::npos);
    std::remove(path.c_str());
  }
}
