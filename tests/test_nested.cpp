// harness/jobs/nested.cpp: article 002's nested mesh as one model. Independent sources: a forward
// written here apart (embedding by lookup, top-k by a plain scan, capacity by group and token
// order, the residual MoE layers in order, a plain softmax) for the reference; the bytes of each
// part by hand from the dims; and planted bugs (a wrong stage order, a wrong expert owner, a
// relayout left out of the ledger), each of which must fail the checks.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include <xtensor/xview.hpp>

#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "harness/jobs/nested.hpp"

using namespace shardlab;

namespace {

// The model's forward in float64, written apart from nested.cpp: B tokens, groups of `group`
// consecutive tokens for the capacity C. Returns p [B, V].
Tensor plain_forward(const NestedInputs& in, const NestedShape& s, std::size_t group, std::size_t C) {
  const std::size_t B = s.batch, m = s.model, h = s.hidden, V = s.vocab, E = static_cast<std::size_t>(s.experts);
  Tensor x = xt::zeros<double>({B, m});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t j = 0; j < m; ++j) x(b, j) = in.embed(static_cast<std::size_t>(in.tokens(b)), j);
  for (int l = 0; l < s.layers; ++l) {
    Tensor next = x;
    std::vector<std::size_t> used(E, 0);
    for (std::size_t b = 0; b < B; ++b) {
      if (b % group == 0) std::fill(used.begin(), used.end(), 0);
      std::vector<double> logit(E, 0.0);
      for (std::size_t e = 0; e < E; ++e)
        for (std::size_t j = 0; j < m; ++j) logit[e] += x(b, j) * in.router[l](j, e);
      std::vector<bool> taken(E, false);
      std::vector<std::size_t> pick;
      for (int k = 0; k < s.top_k; ++k) {
        std::size_t best = E;
        for (std::size_t e = 0; e < E; ++e)
          if (!taken[e] && (best == E || logit[e] > logit[best])) best = e;
        taken[best] = true;
        pick.push_back(best);
      }
      double norm = 0;
      for (std::size_t e : pick) norm += std::exp(logit[e] - logit[pick[0]]);
      for (std::size_t e : pick) {
        if (used[e]++ >= C) continue;  // the expert's slots in this group are full
        const double gate = std::exp(logit[e] - logit[pick[0]]) / norm;
        for (std::size_t j = 0; j < m; ++j) {
          double y = 0;
          for (std::size_t q = 0; q < h; ++q) {
            double a = 0;
            for (std::size_t i = 0; i < m; ++i) a += x(b, i) * in.w_in[l](e, i, q);
            y += std::max(a, 0.0) * in.w_out[l](e, q, j);
          }
          next(b, j) += gate * y;
        }
      }
    }
    x = next;
  }
  Tensor p = xt::zeros<double>({B, V});
  for (std::size_t b = 0; b < B; ++b) {
    double most = -1e300, sum = 0;
    for (std::size_t v = 0; v < V; ++v) {
      for (std::size_t j = 0; j < m; ++j) p(b, v) += x(b, j) * in.unembed(j, v);
      most = std::max(most, p(b, v));
    }
    for (std::size_t v = 0; v < V; ++v) sum += p(b, v) = std::exp(p(b, v) - most);
    for (std::size_t v = 0; v < V; ++v) p(b, v) /= sum;
  }
  return p;
}

// Bytes device (x, y) sends in each part, by hand: r = B/(X Y) tokens of m elements a group,
// C slots per expert, n = Y; written from the dims without nested.cpp's formulas.
std::map<std::string, double> hand_bytes(int X, int Y, int x, double eb, double B, double m, double E, double C, double L) {
  const double r = B / (X * Y), row = r * m * eb, others = Y - 1;
  return {{"embedding", others * row},
          {"to stages", x == 0 ? 0 : row},
          {"encoder experts", (L / X) * X * 2 * others * (E / Y) * C * m * eb},  // layers x micro-batches x 2
          {"encoder stages", x == X - 1 ? 0 : X * row},
          {"to batch", x == X - 1 ? (X - 1) * row : 0},
          {"softmax", others * row + 2 * (2 * others * r * eb)}};
}

// Each part's bytes per device, from the ledger's tensor names (as nested.cpp labels its calls).
std::map<std::string, double> ledger_bytes(const RunResult& run, int device) {
  const std::map<std::string, std::string> part = {
      {"emb_partial", "embedding"}, {"to_stages", "to stages"}, {"dispatch", "encoder experts"},
      {"combine", "encoder experts"}, {"act", "encoder stages"},   {"to_batch", "to batch"},
      {"h_rows", "softmax"},        {"row_max", "softmax"},       {"row_sum", "softmax"}};
  std::map<std::string, double> got;
  for (const auto& row : run.ledger)
    if (row.device == device) got[part.count(row.tensor) ? part.at(row.tensor) : "?"] += double(row.bytes_sent);
  return got;
}

RunResult run_on(const Mesh& mesh, const NestedShape& s, const NestedInputs& in, DType t) {
  Runtime rt(Backend::sim, false, t);
  return rt.run(mesh, nested_program(s, in));
}

bool all_pass(const std::vector<Verdict>& checks) {
  return std::all_of(checks.begin(), checks.end(), [](const Verdict& v) { return v.pass; });
}

}  // namespace

TEST_CASE("nested: the reference is the model written apart (float64), and the 16 devices equal it") {
  const NestedShape s;
  const Mesh mesh = Mesh::parse("X=4,Y=4");
  const NestedInputs in = nested_inputs(s, 3);
  const NestedReference ref = nested_reference(s, in, mesh, DType::float64);
  CHECK(ref.dropped > 0);  // capacity bites: the groups are part of the model
  const Tensor plain = plain_forward(in, s, s.batch / 16, nested_capacity(s, mesh));
  CHECK(double(xt::amax(xt::abs(plain - ref.p))()) < 1e-12);
  for (DType t : {DType::float32, DType::float64}) {
    const NestedReference r = nested_reference(s, in, mesh, t);
    const auto checks = nested_checks(s, mesh, run_on(mesh, s, in, t), r, element_bytes(t));
    REQUIRE(checks.size() == 4);
    for (const Verdict& v : checks) CHECK_MESSAGE(v.pass, v.name << " " << v.detail);
    // embedded and encoded are data movement and the same arithmetic: exact. p's sum over the
    // split vocabulary differs in rounding only: within its tolerance, sure to catch a wrong
    // element far below float32's floor of 1e-3 x RMS.
    CHECK(checks[0].max_abs_error == 0);
    CHECK(checks[1].max_abs_error == 0);
    CHECK(checks[1].power == 0);
    CHECK(checks[2].worst_ratio <= 1);
    CHECK(checks[2].power < (t == DType::float32 ? 1e-5 : 1e-13));
  }
}

TEST_CASE("nested: each part's bytes on every device equal the formula by hand") {
  // X=4,Y=4, float32, B = 64, m = 8, E = 8, C = ceil(2 x 2 x 4 / 8) = 2, 4 layers: r = 4 tokens.
  // embedding 3 x 4 x 8 x 4 = 384; to stages 128 (x > 0); experts 2 x 4 x 3 x 2 x 2 x 8 x 4 = 3072;
  // stages 4 x 128 = 512 (x < 3); to batch 3 x 128 = 384 (x = 3); softmax 384 + 4 x 3 x 4 x 4 = 576.
  const NestedShape s;
  const Mesh mesh = Mesh::parse("X=4,Y=4");
  const RunResult run = run_on(mesh, s, nested_inputs(s, 0), DType::float32);
  CHECK(nested_capacity(s, mesh) == 2);
  for (int d = 0; d < 16; ++d) {
    const int x = d / 4;
    const std::map<std::string, double> want = {{"embedding", 384}, {"to stages", x > 0 ? 128 : 0},
                                                {"encoder experts", 3072}, {"encoder stages", x < 3 ? 512 : 0},
                                                {"to batch", x == 3 ? 384 : 0}, {"softmax", 576}};
    std::map<std::string, double> got = ledger_bytes(run, d);
    for (const auto& [part, b] : want) CHECK_MESSAGE(got[part] == b, "device " << d << " " << part);
    CHECK(got.count("?") == 0);
    CHECK(want == nested_bytes(s, mesh, d, 4));
  }
  // Other meshes and sizes, against the formula by hand.
  for (const char* m : {"X=2,Y=4", "X=4,Y=2", "X=1,Y=4", "X=4,Y=1", "X=2,Y=8"}) {
    NestedShape t;
    t.experts = 16;
    t.capacity_factor = 1.5;
    t.layers = 8;
    const Mesh mm = Mesh::parse(m);
    const int X = mm.axis_size("X"), Y = mm.axis_size("Y");
    const double C = std::max(1.0, std::ceil(1.5 * 2 * (64.0 / (X * Y)) / 16));
    const RunResult r = run_on(mm, t, nested_inputs(t, 1), DType::float64);
    for (int d = 0; d < mm.devices(); ++d) {
      const auto want = hand_bytes(X, Y, mm.coords(d)[0], 8, 64, 8, 16, C, 8);
      auto got = ledger_bytes(r, d);
      for (const auto& [part, b] : want) CHECK_MESSAGE(got[part] == b, m << " device " << d << " " << part);
    }
  }
}

TEST_CASE("nested: planted bugs fail: stages in the wrong order, experts on the wrong devices, a relayout not counted") {
  const NestedShape s;
  const Mesh mesh = Mesh::parse("X=4,Y=4");
  const NestedInputs in = nested_inputs(s, 0);
  const NestedReference ref = nested_reference(s, in, mesh, DType::float32);
  REQUIRE(all_pass(nested_checks(s, mesh, run_on(mesh, s, in, DType::float32), ref, 4)));

  // Stage x runs the layers of stage 3 - x.
  NestedInputs reversed = in;
  std::reverse(reversed.router.begin(), reversed.router.end());
  std::reverse(reversed.w_in.begin(), reversed.w_in.end());
  std::reverse(reversed.w_out.begin(), reversed.w_out.end());
  auto checks = nested_checks(s, mesh, run_on(mesh, s, reversed, DType::float32), ref, 4);
  CHECK(checks[0].pass);  // the embedding is before the stages
  CHECK_FALSE(checks[1].pass);
  CHECK_FALSE(checks[2].pass);

  // Device y holds the experts of device y + 1: its weights are the next block's.
  NestedInputs moved = in;
  for (int l = 0; l < s.layers; ++l) {
    Tensor& wi = moved.w_in[static_cast<std::size_t>(l)];
    Tensor& wo = moved.w_out[static_cast<std::size_t>(l)];
    const Tensor wi0 = wi, wo0 = wo;
    for (std::size_t e = 0; e < 8; ++e) {
      xt::view(wi, e) = xt::view(wi0, (e + 2) % 8);
      xt::view(wo, e) = xt::view(wo0, (e + 2) % 8);
    }
  }
  checks = nested_checks(s, mesh, run_on(mesh, s, moved, DType::float32), ref, 4);
  CHECK_FALSE(checks[1].pass);
  CHECK_FALSE(checks[2].pass);

  // The relayout from batch blocks to stages left out of the ledger: the bytes check fails.
  RunResult run = run_on(mesh, s, in, DType::float32);
  run.ledger.erase(std::remove_if(run.ledger.begin(), run.ledger.end(), [](const LedgerRow& r) { return r.tensor == "to_stages"; }),
                   run.ledger.end());
  checks = nested_checks(s, mesh, run, ref, 4);
  CHECK(checks[2].pass);
  CHECK_FALSE(checks[3].pass);
  CHECK(checks[3].detail.find("to stages") != std::string::npos);
}

TEST_CASE("nested: sizes the mesh does not divide, or out of range, are refused with one sentence") {
  const Mesh mesh = Mesh::parse("X=4,Y=4");
  auto refused = [&](NestedShape s, const std::string& flag, const Mesh& m) {
    try {
      check_nested(s, m);
    } catch (const Error& e) {
      CHECK_MESSAGE(std::string(e.what()).find(flag) != std::string::npos, std::string(e.what()));
      return true;
    }
    return false;
  };
  CHECK_FALSE(refused(NestedShape{}, "", mesh));
  const std::pair<const char*, void (*)(NestedShape&)> bad[] = {
      {"--batch", [](NestedShape& s) { s.batch = 60; }},   {"--vocab", [](NestedShape& s) { s.vocab = 30; }},
      {"--experts", [](NestedShape& s) { s.experts = 6; }}, {"--layers", [](NestedShape& s) { s.layers = 6; }},
      {"--top-k", [](NestedShape& s) { s.top_k = 9; }},    {"--model", [](NestedShape& s) { s.model = 65; }}};
  for (const auto& [flag, change] : bad) {
    NestedShape s;
    change(s);
    CHECK_MESSAGE(refused(s, flag, mesh), flag);
  }
  CHECK(refused(NestedShape{}, "the axes X", Mesh::parse("D=4,Y=4")));
}
