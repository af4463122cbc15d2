// harness/models/moe.cpp: the mixture-of-experts FFN. Independent sources: a hand example of the
// routing rule, the capacity formula, drops as max(0, routed - C), the real ring AllReduce for
// ring_order_sum, the bytes of an AllToAll by hand, and the gradients against central differences
// of a forward written here apart (float64, non-integer inputs, so no ties and no exact sums).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include <xtensor/xview.hpp>

#include "collectives/collectives.hpp"
#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "harness/models/moe.hpp"

using namespace shardlab;

namespace {

// The MoE's loss sum(out * dout), forward only, written apart from moe.cpp: per token, its top-k
// logits by a plain scan, softmax gates, capacity per group by token order.
double plain_loss(const MoeInputs& in, const MoeShape& s, std::size_t groups) {
  const std::size_t T = s.tokens, m = s.model, h = s.hidden, E = static_cast<std::size_t>(s.experts);
  const std::size_t per = T / groups, C = moe_capacity(s, per);
  std::vector<std::vector<std::size_t>> used(groups, std::vector<std::size_t>(E, 0));
  double loss = 0;
  for (std::size_t t = 0; t < T; ++t) {
    std::vector<double> l(E, 0.0);
    for (std::size_t e = 0; e < E; ++e)
      for (std::size_t j = 0; j < m; ++j) l[e] += in.x(t, j) * in.w_router(j, e);
    std::vector<bool> taken(E, false);
    std::vector<std::size_t> pick;
    for (int k = 0; k < s.top_k; ++k) {
      std::size_t best = E;
      for (std::size_t e = 0; e < E; ++e)
        if (!taken[e] && (best == E || l[e] > l[best])) best = e;
      taken[best] = true;
      pick.push_back(best);
    }
    double z = 0;
    for (auto e : pick) z += std::exp(l[e] - l[pick[0]]);
    for (auto e : pick) {
      if (used[t / per][e]++ >= C) continue;
      const double gate = std::exp(l[e] - l[pick[0]]) / z;
      for (std::size_t j = 0; j < m; ++j) {
        double y = 0;
        for (std::size_t i = 0; i < h; ++i) {
          double a = 0;
          for (std::size_t q = 0; q < m; ++q) a += in.x(t, q) * in.w_in(e, q, i);
          y += std::max(a, 0.0) * in.w_out(e, i, j);
        }
        loss += gate * y * in.dout(t, j);
      }
    }
  }
  return loss;
}

MoeInputs uniform_inputs(const MoeShape& s, std::uint64_t seed) {
  const std::size_t T = s.tokens, m = s.model, h = s.hidden, E = static_cast<std::size_t>(s.experts);
  return {random_uniform({T, m}, seed, -1, 1), random_uniform({m, E}, seed + 1, -1, 1),
          random_uniform({E, m, h}, seed + 2, -1, 1), random_uniform({E, h, m}, seed + 3, -1, 1),
          random_uniform({T, m}, seed + 4, -1, 1)};
}

}  // namespace

TEST_SUITE("moe") {
  TEST_CASE("moe: top-k routing by hand, ties to the lower index, softmax gates over the chosen") {
    const double logits[] = {1, 3, 3, 0, 2};
    const TokenRoute r = route_token(logits, 5, 3, DType::float64);
    CHECK(r.experts == std::vector<int>{1, 2, 4});
    // exp(0), exp(0), exp(-1) over their sum.
    const double z = 2 + std::exp(-1.0);
    CHECK(r.gates[0] == doctest::Approx(1 / z).epsilon(1e-15));
    CHECK(r.gates[2] == doctest::Approx(std::exp(-1.0) / z).epsilon(1e-15));
    // dl_e = g_e (dg_e - sum g dg): with dg = (1, 0, 0), dl_1 = g_1 (1 - g_1), dl_2 = -g_2 g_1.
    const auto dl = router_backward(r, {1, 0, 0}, 5, DType::float64);
    CHECK(dl[0] == 0);
    CHECK(dl[1] == doctest::Approx(r.gates[0] * (1 - r.gates[0])));
    CHECK(dl[2] == doctest::Approx(-r.gates[1] * r.gates[0]));
    CHECK(dl[3] == 0);
  }

  TEST_CASE("moe: capacity ceil(cf k t / E), and kept = min(routed, C) in every group") {
    MoeShape s;  // E 8, top 2
    CHECK(moe_capacity(s, 32) == 8);
    s.capacity_factor = 1.25;
    CHECK(moe_capacity(s, 32) == 10);
    s.capacity_factor = 1.1;
    CHECK(moe_capacity(s, 32) == 9);  // 8.8 up
    s.capacity_factor = 0.01;
    CHECK(moe_capacity(s, 32) == 1);
    for (double cf : {1.0, 2.0}) {
      s.capacity_factor = cf;
      const MoeResult r = moe_reference(moe_inputs(s, 0), s, 4, 2, DType::float32);
      const double C = static_cast<double>(moe_capacity(s, 32));
      double dropped = 0;
      for (std::size_t i = 0; i < r.kept.size(); ++i) {
        CHECK(r.kept.data()[i] == std::min(r.routed.data()[i], C));
        dropped += r.routed.data()[i] - r.kept.data()[i];
      }
      CHECK(xt::sum(r.routed)() == 2.0 * 128);  // every token routed twice
      if (cf == 1.0) CHECK(dropped > 0);
      if (cf == 2.0) CHECK(dropped == 0);
    }
  }

  TEST_CASE("moe: bad shapes refused in one sentence") {
    MoeShape s;
    CHECK_NOTHROW(check_moe_shape(s, 4, 2));
    CHECK_THROWS_WITH_AS(check_moe_shape(s, 4, 3), doctest::Contains("not divisible by the expert axis (size 3)"), Error);
    CHECK_THROWS_WITH_AS(check_moe_shape(s, 3, 1), doctest::Contains("128 tokens is not divisible"), Error);
    s.top_k = 9;
    CHECK_THROWS_WITH_AS(check_moe_shape(s, 4, 2), doctest::Contains("--top-k is 9"), Error);
  }

  TEST_CASE("moe: ring_order_sum is what the ring AllReduce computes, bit for bit") {
    for (DType t : {DType::bfloat16, DType::float32}) {
      for (const char* mesh_text : {"Y=4", "Y=3", "X=4,Y=2"}) {
        const Mesh mesh = Mesh::parse(mesh_text);
        const std::string axis = mesh.names()[0];
        const int n = mesh.axis_size(axis), blocks = mesh.devices() / n;
        // Device d's part: a [blocks * 2, 7] tensor of which it all-reduces rows of its block.
        std::vector<Tensor> parts;
        for (int i = 0; i < n; ++i) parts.push_back(random_uniform({std::size_t(2 * blocks), 7}, 10 + i, -3, 3));
        Runtime rt(Backend::sim, false, t);
        const RunResult r = rt.run(mesh, [&](Device& dev) -> Outputs {
          const std::size_t b = mesh.rank() == 1 ? 0 : static_cast<std::size_t>(dev.coord(mesh.names()[1]));
          Tensor mine = xt::view(parts[dev.coord(axis)], xt::range(2 * b, 2 * b + 2), xt::all());
          return {{"sum", all_reduce(dev, mine, {axis}, "s")}};
        });
        const Tensor want = ring_order_sum(parts, t, static_cast<std::size_t>(blocks));
        bool same = true, differs_from_plain = false;
        for (int d = 0; d < mesh.devices(); ++d) {
          const std::size_t b = mesh.rank() == 1 ? 0 : static_cast<std::size_t>(d % blocks);
          const Tensor got = r.outputs[d].at("sum");
          for (std::size_t i = 0; i < 2; ++i)
            for (std::size_t j = 0; j < 7; ++j) {
              same = same && got(i, j) == want(2 * b + i, j);
              double plain = 0;  // left to right in double, rounded once: another order
              for (int p = 0; p < n; ++p) plain += round_to(t, parts[p](2 * b + i, j));
              differs_from_plain = differs_from_plain || round_to(t, plain) != want(2 * b + i, j);
            }
        }
        CHECK_MESSAGE(same, dtype_name(t), " ", mesh_text);
        // The order matters in these types: a left-to-right sum would not pass a bit-exact check.
        CHECK(differs_from_plain);
      }
    }
  }

  TEST_CASE("moe: the reference's gradients against central differences of a forward written apart") {
    MoeShape s;
    s.tokens = 16, s.experts = 4, s.top_k = 2, s.model = 4, s.hidden = 6, s.capacity_factor = 1.0;
    MoeInputs in = uniform_inputs(s, 7);
    const MoeResult r = moe_reference(in, s, 2, 1, DType::float64);
    CHECK(xt::sum(r.routed)() - xt::sum(r.kept)() > 0);  // some drops: the rule is exercised
    double loss = 0;
    for (std::size_t i = 0; i < r.out.size(); ++i) loss += r.out.data()[i] * in.dout.data()[i];
    CHECK(loss == doctest::Approx(plain_loss(in, s, 2)).epsilon(1e-12));
    const double step = 1e-6;
    int checked = 0;
    auto check_grad = [&](Tensor& w, const Tensor& g, const char* name) {
      for (std::size_t i = 0; i < w.size(); i += 3) {
        const double keep = w.data()[i];
        w.data()[i] = keep + step;
        const double up = plain_loss(in, s, 2);
        w.data()[i] = keep - step;
        const double down = plain_loss(in, s, 2);
        w.data()[i] = keep;
        const double fd = (up - down) / (2 * step);
        // Central differences: O(step^2) truncation and about 1e-16 |L| / step rounding.
        CHECK_MESSAGE(std::abs(fd - g.data()[i]) <= 1e-6 * std::max(1.0, std::abs(fd)), name, "[", i, "] fd ", fd,
                      " analytic ", g.data()[i]);
        ++checked;
      }
    };
    check_grad(in.x, r.dx, "dx");
    check_grad(in.w_router, r.dw_router, "dW_router");
    check_grad(in.w_in, r.dw_in, "dW_in");
    check_grad(in.w_out, r.dw_out, "dW_out");
    CHECK(checked > 80);
  }

  TEST_CASE("moe: sharded on X=2,Y=4 equals the reference; AllToAll bytes by hand; swap-blocks caught") {
    MoeShape s;  // 128 tokens on 8 devices: 16 each, C = ceil(2 x 16 / 8) = 4
    const Mesh mesh = Mesh::parse("X=2,Y=4");
    const MoeInputs in = moe_inputs(s, 3);
    for (DType t : {DType::float32, DType::bfloat16}) {
      for (bool fault : {false, true}) {
        Runtime rt(Backend::sim, false, t);
        if (fault) rt.inject(parse_fault("swap-blocks"));
        const RunResult r = rt.run(mesh, [&](Device& dev) { return moe_device(dev, in, s); });
        const MoeResult ref = moe_reference(in, s, 8, 2, t);
        bool same = true;
        for (int d = 0; d < 8; ++d) {
          const Tensor& out = r.outputs[d].at("out");
          for (std::size_t i = 0; i < 16; ++i)
            for (std::size_t j = 0; j < s.model; ++j) same = same && out(i, j) == ref.out(16 * d + i, j);
          const Tensor& dw = r.outputs[d].at("dW_in");  // experts 2y, 2y+1
          for (std::size_t e = 0; e < 2; ++e)
            for (std::size_t j = 0; j < s.model; ++j)
              same = same && dw(e, j, 0) == ref.dw_in(2 * static_cast<std::size_t>(d % 4) + e, j, 0);
        }
        CHECK(same == !fault);
        // [E, C, m] = [8, 4, 8] elements, 3/4 of them sent: 192 x element bytes; four calls per device.
        int calls = 0;
        for (const auto& row : r.ledger)
          if (row.op == "all_to_all") {
            ++calls;
            CHECK(row.bytes_sent == 192 * element_bytes(t));
          }
        CHECK(calls == 4 * 8);
        CHECK(moe_all_to_all_bytes(s, 4, 4, element_bytes(t)) == 192 * element_bytes(t));
      }
    }
  }
}
