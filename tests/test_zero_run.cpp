// harness/models/zero_run.cpp: article 004's three-layer model under plain DP and ZeRO 1-3.
// Independent sources: the ring formulas for bytes, the calls each stage must make, Adam's first
// step (lr times the gradient's sign), and the gradient's sign from central differences of a loss
// written here apart.
#include <doctest/doctest.h>

#include "tests/run_binary.hpp"
#include "tests/sanitized.hpp"

#include <cmath>
#include <map>
#include <string>

#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "harness/check/report.hpp"
#include "harness/models/zero_run.hpp"

using namespace shardlab;

using shardlab::testing::run_binary;

namespace {

// L = (1/N) sum over devices of sum(y_d * R_d), y = tanh(tanh(x A) B) C, written out directly.
double loss(const ZeroInputs& in, const std::array<Tensor, 3>& w) {
  double total = 0;
  const std::size_t n = in.x.size();
  for (std::size_t d = 0; d < n; ++d) {
    const auto& x = in.x[d];
    const std::size_t b = x.shape()[0], D = x.shape()[1];
    for (std::size_t i = 0; i < b; ++i) {
      std::vector<double> h(D), g(D);
      for (std::size_t j = 0; j < D; ++j) {
        double s = 0;
        for (std::size_t k = 0; k < D; ++k) s += x(i, k) * w[0](k, j);
        h[j] = std::tanh(s);
      }
      for (std::size_t j = 0; j < D; ++j) {
        double s = 0;
        for (std::size_t k = 0; k < D; ++k) s += h[k] * w[1](k, j);
        g[j] = std::tanh(s);
      }
      for (std::size_t j = 0; j < D; ++j) {
        double y = 0;
        for (std::size_t k = 0; k < D; ++k) y += g[k] * w[2](k, j);
        total += y * in.r[d](i, j);
      }
    }
  }
  return total / static_cast<double>(n);
}

}  // namespace

TEST_SUITE("zero_run") {

TEST_CASE("zero_run: the layers must split over the devices") {
  ZeroModel m;
  CHECK_NOTHROW(zero_inputs(m, 3, 0));
  CHECK_NOTHROW(zero_inputs(m, 4, 0));
  try {
    zero_inputs(m, 5, 0);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::not_divisible);
    CHECK(std::string(e.what()).find("12 rows do not split over 5 devices") != std::string::npos);
  }
}

TEST_CASE("zero_run: the reference carries Adam against Adam written plainly, which a wrong bias correction fails") {
  ZeroModel m;
  const ZeroInputs in = zero_inputs(m, 3, 7);
  const ZeroReference ref = zero_reference(m, in, DType::float32);
  CHECK(ref.adam_scalar.pass);
  CHECK(ref.adam_scalar.name == "Adam's step on 4 elements of A against Adam written plainly");
  CHECK(ref.adam_scalar.power >= 0);
  CHECK(ref.adam_scalar.power < 1e-9);
  // Lesson 15 runs it beside its checks of the sharded run (its JSON names it). ThreadSanitizer's
  // build has only lessons 02, 08 and 16 (TSAN_LESSONS).
  if (shardlab::testing::kThreadSanitized) return;
  const auto r = run_binary("15_zero --json");
  CHECK(r.out.find("\"Adam's step on 4 elements of A against Adam written plainly\"") != std::string::npos);
}

TEST_CASE("zero_run: Adam's first step moves every weight by lr against its gradient's sign") {
  ZeroModel m;
  m.steps = 1;
  const ZeroInputs in = zero_inputs(m, 3, 7);
  const ZeroReference ref = zero_reference(m, in, DType::float64);
  int checked = 0;
  for (int k = 0; k < 3; ++k)
    for (std::size_t e = 0; e < in.weights[k].size(); e += 7) {
      auto plus = in.weights, minus = in.weights;
      const double h = 1e-6;
      plus[k].data()[e] += h;
      minus[k].data()[e] -= h;
      const double fd = (loss(in, plus) - loss(in, minus)) / (2 * h);
      const double moved = ref.weights[k].data()[e] - in.weights[k].data()[e];
      if (std::abs(fd) < 1e-6) continue;  // too near 0 to know its sign from differences
      CAPTURE(k);
      CAPTURE(e);
      CHECK(moved == doctest::Approx(fd > 0 ? -m.adam.lr : m.adam.lr).epsilon(1e-4));
      ++checked;
    }
  CHECK(checked > 50);
}

TEST_CASE("zero_run: every stage's calls, bytes by the ring formulas, and weights equal to the reference") {
  ZeroModel m;
  m.steps = 2;
  const int n = 3;
  const ZeroInputs in = zero_inputs(m, n, 3);
  const ZeroReference ref = zero_reference(m, in, DType::float64);
  const double p = 3.0 * 144, eb = 8;
  // Calls per step on each device: op -> count.
  const std::map<ZeroMode, std::map<std::string, int>> calls = {
      {ZeroMode::dp, {{"all_reduce", 3}}},
      {ZeroMode::zero1, {{"reduce_scatter", 3}, {"all_gather", 3}}},
      {ZeroMode::zero2, {{"reduce_scatter", 3}, {"all_gather", 3}}},
      {ZeroMode::zero3, {{"reduce_scatter", 3}, {"all_gather", 6}}}};
  Runtime rt(Backend::sim, false, DType::float64);
  for (const auto& [mode, want] : calls) {
    CAPTURE(zero_mode_name(mode));
    const RunResult r = rt.run(Mesh::parse("X=3"), zero_program(mode, m, in));
    std::map<std::string, int> got;
    double sent = 0;
    for (const auto& row : r.ledger)
      if (row.device == 0) {
        got[row.op] += 1;
        sent += static_cast<double>(row.bytes_sent);
        CHECK(row.tensor.rfind(zero_mode_label(mode) + "_", 0) == 0);
      }
    for (auto& [op, count] : got) count /= m.steps;
    CHECK(got == want);
    const double ring = (n - 1.0) / n * p * eb;  // one ReduceScatter or AllGather of every weight
    CHECK(sent / m.steps == (mode == ZeroMode::zero3 ? 3 : 2) * ring);
    for (int d = 0; d < n; ++d)
      for (int k = 0; k < 3; ++k) {
        const Tensor& got_w = r.outputs[d].at(std::string(1, "ABC"[k]));
        const Tensor want_w = mode == ZeroMode::zero3
                                  ? Tensor(xt::view(ref.weights[k], xt::range(4 * d, 4 * d + 4), xt::all()))
                                  : ref.weights[k];
        REQUIRE(got_w.shape() == want_w.shape());
        CHECK(xt::amax(xt::abs(got_w - want_w))() <= 1e-12);
      }
  }
}

// Issue 32: D = 5 rows on 4 devices. chunk (torch.chunk): 2, 2, 1, 0 rows; pad: 2 each, the third
// device 1 row of padding, the fourth all padding. Weights and gradients against the unsharded
// Adam run, padding zero, and each collective's bytes against the ring written out here.
TEST_CASE("zero_run --uneven chunk|pad: 5 rows on 4 devices train like the unsharded model") {
  ZeroModel m;
  m.width = 5;
  m.steps = 2;
  const std::size_t D = 5, n = 4, eb = 8;
  const std::size_t starts[] = {0, 2, 4, 5}, real_rows[] = {2, 2, 1, 0};
  CHECK_THROWS_AS(zero_inputs(m, 4, 3), Error);  // none (the default) keeps the refusal
  for (Uneven u : {Uneven::chunk, Uneven::pad}) {
    CAPTURE(uneven_name(u));
    m.uneven = u;
    CHECK(zero_slice_rows(m, 4) == std::vector<std::size_t>{2, 2, 1, 0});
    const ZeroInputs in = zero_inputs(m, 4, 3);
    const ZeroReference ref = zero_reference(m, in, DType::float64);
    Mesh mesh = Mesh::parse("X=4");
    mesh.set_uneven(u);
    Runtime rt(Backend::sim, false, DType::float64);
    for (ZeroMode mode : {ZeroMode::dp, ZeroMode::zero1, ZeroMode::zero2, ZeroMode::zero3}) {
      CAPTURE(zero_mode_name(mode));
      const RunResult r = rt.run(mesh, zero_program(mode, m, in));
      for (std::size_t d = 0; d < n; ++d)
        for (int k = 0; k < 3; ++k) {
          // Whole weights, or (zero3) the own rows, stored as 2 rows under pad with zeros after the real ones.
          for (const bool grad : {false, true}) {
            const bool split = grad ? mode != ZeroMode::dp : mode == ZeroMode::zero3;
            const Tensor& got = r.outputs[d].at((grad ? "d" : "") + std::string(1, "ABC"[k]));
            const Tensor& whole = grad ? ref.gradient[k] : ref.weights[k];
            const std::size_t rows = !split ? D : u == Uneven::pad ? 2 : real_rows[d];
            REQUIRE(got.shape() == Shape{rows, D});
            for (std::size_t i = 0; i < rows; ++i)
              for (std::size_t j = 0; j < D; ++j) {
                const bool padding = split && i >= real_rows[d];
                const double want = padding ? 0.0 : whole(split ? starts[d] + i : i, j);
                CHECK(std::fabs(got(i, j) - want) <= (grad ? 1e-12 : 1e-9));
              }
          }
        }
      const auto summary = summarize(r.ledger);
      for (const auto& c : summary) {
        CAPTURE(c.op + " " + c.tensor);
        CHECK(c.matches());  // measured = the ledger row's own prediction
        // Every gather and scatter of a [5, 5] weight: the busiest device sends every part but the
        // smallest (chunk: all 5 rows but the empty part's; pad: 3 padded parts of 2 rows).
        if (c.op != "all_reduce") CHECK(c.bytes_per_device == (u == Uneven::chunk ? 5 * D * eb : 3 * 2 * D * eb));
      }
    }
  }
}

}  // TEST_SUITE
