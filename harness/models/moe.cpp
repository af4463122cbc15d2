// The mixture of experts' dispatch and combine (harness/models/moe.hpp): the sharded program, its
// AllToAlls and AllReduces, and the unsharded reference that sums in the same order. The router's
// and the experts' math is in moe_expert.cpp.
#include "harness/models/moe.hpp"

#include <algorithm>
#include <cmath>

#include "collectives/collectives.hpp"
#include "core/error.hpp"

namespace shardlab {

MoeInputs moe_inputs(const MoeShape& s, std::uint64_t seed) {
  const std::size_t T = s.tokens, m = s.model, h = s.hidden, E = static_cast<std::size_t>(s.experts);
  MoeInputs in;
  in.x = random_integers({T, m}, seed, -1, 1);
  in.w_router = random_integers({m, E}, seed + 1, -2, 2);
  in.w_in = random_integers({E, m, h}, seed + 2, -1, 1);
  in.w_out = random_integers({E, h, m}, seed + 3, -1, 1);
  in.dout = random_integers({T, m}, seed + 4, -2, 2);
  return in;
}

void check_moe_shape(const MoeShape& s, int devices, int expert_devices) {
  auto fail = [](const std::string& why) { throw Error(ErrorKind::parse, why); };
  if (s.experts < 1 || s.experts > 1024)
    fail("--experts is " + std::to_string(s.experts) + "; give 1 to 1024");
  if (s.top_k < 1 || s.top_k > s.experts)
    fail("--top-k is " + std::to_string(s.top_k) + "; give 1 to --experts (" + std::to_string(s.experts) + ")");
  if (!(s.capacity_factor > 0) || s.capacity_factor > 64)
    fail("--capacity-factor must be above 0 and at most 64");
  if (s.experts % expert_devices != 0)
    fail("--experts " + std::to_string(s.experts) + " is not divisible by the expert axis (size " +
         std::to_string(expert_devices) + "); give a multiple of " + std::to_string(expert_devices));
  if (s.tokens % static_cast<std::size_t>(devices) != 0)
    fail("the batch of " + std::to_string(s.tokens) + " tokens is not divisible by the mesh's " +
         std::to_string(devices) + " devices");
}

std::size_t moe_capacity(const MoeShape& s, std::size_t group_tokens) {
  const double c = std::ceil(s.capacity_factor * s.top_k * static_cast<double>(group_tokens) / s.experts - 1e-9);
  return std::max<std::size_t>(1, static_cast<std::size_t>(c));
}

Tensor ring_order_sum(const std::vector<Tensor>& parts, DType t, std::size_t blocks) {
  const std::size_t n = parts.size(), e = parts[0].size() / blocks;
  Tensor out = xt::zeros<double>(shape_of(parts[0]));
  for (std::size_t b = 0; b < blocks; ++b) {
    std::size_t begin = b * e;
    for (std::size_t c = 0; c < n; ++c) {  // chunk c: the first e % n chunks one element longer
      const std::size_t end = begin + e / n + (c < e % n ? 1 : 0);
      for (std::size_t i = begin; i < end; ++i) {
        double acc = round_to(t, parts[(c + 1) % n].data()[i]);
        for (std::size_t s = 2; s <= n; ++s) acc = round_to(t, acc + round_to(t, parts[(c + s) % n].data()[i]));
        out.data()[i] = acc;
      }
      begin = end;
    }
  }
  return out;
}

std::size_t moe_all_to_all_bytes(const MoeShape& s, std::size_t capacity, int expert_devices,
                                 std::size_t element_bytes) {
  const std::size_t n = static_cast<std::size_t>(expert_devices);
  return (n - 1) * (static_cast<std::size_t>(s.experts) * capacity * s.model / n) * element_bytes;
}

namespace {

// Tensor `v` rounded to t in place.
void round_all(Tensor& v, DType t) {
  for (auto& a : v) a = round_to(t, a);
}

}  // namespace

MoeResult moe_reference(const MoeInputs& in, const MoeShape& s, int groups, int replicas, DType t) {
  const std::size_t T = s.tokens, m = s.model, hid = s.hidden, E = static_cast<std::size_t>(s.experts);
  const std::size_t K = static_cast<std::size_t>(s.top_k), G = static_cast<std::size_t>(groups);
  const std::size_t R = static_cast<std::size_t>(replicas), per_group = T / G, C = moe_capacity(s, per_group);
  MoeResult r;
  r.out = xt::zeros<double>({T, m});
  r.dx = xt::zeros<double>({T, m});
  r.kept = xt::zeros<double>({G, E});
  r.routed = xt::zeros<double>({G, E});
  std::vector<Tensor> router_parts(G, Tensor(xt::zeros<double>({m, E})));
  std::vector<Tensor> in_parts(R, Tensor(xt::zeros<double>({E, m, hid})));
  std::vector<Tensor> out_parts(R, Tensor(xt::zeros<double>({E, hid, m})));
  std::vector<double> h(hid), y(m), dy(m), dxe(m);
  for (std::size_t tok = 0; tok < T; ++tok) {
    const std::size_t g = tok / per_group, rep = g / (G / R);
    const auto logits = token_logits(in.x, in.w_router, tok, s.experts, t);
    const TokenRoute route = route_token(logits.data(), s.experts, s.top_k, t);
    const double* x = &in.x(tok, 0);
    const double* dout = &in.dout(tok, 0);
    std::vector<double> dgates(K, 0.0), out_acc(m, 0.0);
    std::vector<std::vector<double>> dx_experts;
    for (std::size_t k = 0; k < K; ++k) {
      const std::size_t e = static_cast<std::size_t>(route.experts[k]);
      r.routed(g, e) += 1;
      if (r.kept(g, e) >= static_cast<double>(C)) continue;  // dropped: the expert is full
      r.kept(g, e) += 1;
      expert_forward(in.w_in, in.w_out, e, x, h.data(), y.data(), m, hid, t);
      double dg = 0;
      for (std::size_t j = 0; j < m; ++j) {
        out_acc[j] += route.gates[k] * y[j];
        dg += dout[j] * y[j];
        dy[j] = round_to(t, route.gates[k] * dout[j]);
      }
      dgates[k] = round_to(t, dg);
      expert_backward(in.w_in, in.w_out, e, x, h.data(), dy.data(), dxe.data(), &in_parts[rep](e, 0, 0),
                      &out_parts[rep](e, 0, 0), m, hid, t);
      dx_experts.push_back(dxe);
    }
    const std::vector<double> dl = router_backward(route, dgates, s.experts, t);
    for (std::size_t j = 0; j < m; ++j) {
      r.out(tok, j) = round_to(t, out_acc[j]);
      double acc = 0;
      for (std::size_t e = 0; e < E; ++e) acc += dl[e] * in.w_router(j, e);
      for (const auto& d : dx_experts) acc += d[j];
      r.dx(tok, j) = round_to(t, acc);
      for (std::size_t e = 0; e < E; ++e) router_parts[g](j, e) += x[j] * dl[e];
    }
  }
  r.dw_router = ring_order_sum(router_parts, t);
  // Each expert device all-reduces its own experts' block: E/n experts, chunked on their own.
  const std::size_t expert_devices = G / R;
  r.dw_in = ring_order_sum(in_parts, t, expert_devices);
  r.dw_out = ring_order_sum(out_parts, t, expert_devices);
  return r;
}

namespace {

// This device's tokens [first, first + T) routed, and packed by expert and slot into dispatch
// [E, C, m]; slot[i][k]: assignment k of token i's place in its expert's buffer, or -1 (dropped:
// the expert is full). kept and routed [1, E]: the group's counts; logits [T, E]: the router's.
struct Packed {
  std::vector<TokenRoute> routes;
  std::vector<std::vector<long>> slot;
  Tensor dispatch, kept, routed, logits;
};

Packed route_and_pack(const MoeInputs& in, const MoeShape& s, std::size_t first, std::size_t T, std::size_t C,
                      DType t) {
  const std::size_t E = static_cast<std::size_t>(s.experts), K = static_cast<std::size_t>(s.top_k), m = s.model;
  Packed pk{{}, std::vector<std::vector<long>>(T, std::vector<long>(K, -1)), xt::zeros<double>({E, C, m}),
            xt::zeros<double>({std::size_t{1}, E}), xt::zeros<double>({std::size_t{1}, E}),
            xt::zeros<double>({T, E})};
  for (std::size_t i = 0; i < T; ++i) {
    const auto logits = token_logits(in.x, in.w_router, first + i, s.experts, t);
    std::copy(logits.begin(), logits.end(), &pk.logits(i, 0));
    pk.routes.push_back(route_token(logits.data(), s.experts, s.top_k, t));
    for (std::size_t k = 0; k < K; ++k) {
      const std::size_t e = static_cast<std::size_t>(pk.routes[i].experts[k]);
      pk.routed(0, e) += 1;
      if (pk.kept(0, e) >= static_cast<double>(C)) continue;
      pk.slot[i][k] = static_cast<long>(pk.kept(0, e));
      pk.kept(0, e) += 1;
      std::copy_n(&in.x(first + i, 0), m, &pk.dispatch(e, static_cast<std::size_t>(pk.slot[i][k]), 0));
    }
  }
  return pk;
}

// Combine at the tokens: out [T, m], the experts' results `back` [E, C, m] weighted by the gates;
// and the backward's start there: dys [E, C, m] (gate times dout, to send to the experts) and each
// token's d logits (router_backward of its d gates).
struct Combined {
  Tensor out, dys;
  std::vector<std::vector<double>> dl;
};

Combined combine(const Packed& pk, const Tensor& back, const MoeInputs& in, const MoeShape& s, std::size_t first,
                 DType t) {
  const std::size_t T = pk.slot.size(), K = static_cast<std::size_t>(s.top_k), m = s.model;
  Combined cb{xt::zeros<double>({T, m}), xt::zeros<double>(shape_of(back)), std::vector<std::vector<double>>(T)};
  for (std::size_t i = 0; i < T; ++i) {
    std::vector<double> acc(m, 0.0), dgates(K, 0.0);
    const double* dout = &in.dout(first + i, 0);
    const TokenRoute& route = pk.routes[i];
    for (std::size_t k = 0; k < K; ++k) {
      if (pk.slot[i][k] < 0) continue;
      const std::size_t e = static_cast<std::size_t>(route.experts[k]), q = static_cast<std::size_t>(pk.slot[i][k]);
      double dg = 0;
      for (std::size_t j = 0; j < m; ++j) {
        acc[j] += route.gates[k] * back(e, q, j);
        dg += dout[j] * back(e, q, j);
        cb.dys(e, q, j) = round_to(t, route.gates[k] * dout[j]);
      }
      dgates[k] = round_to(t, dg);
    }
    for (std::size_t j = 0; j < m; ++j) cb.out(i, j) = round_to(t, acc[j]);
    cb.dl[i] = router_backward(route, dgates, s.experts, t);
  }
  return cb;
}

// The backward's end at the tokens: dx [T, m] (the router's part and the experts' dx_back [E, C, m])
// and this device's terms of dW_router [m, E].
void token_gradients(const Packed& pk, const Combined& cb, const Tensor& dx_back, const MoeInputs& in,
                     const MoeShape& s, std::size_t first, DType t, Tensor& dx, Tensor& dw_router) {
  const std::size_t T = pk.slot.size(), K = static_cast<std::size_t>(s.top_k), m = s.model;
  const std::size_t E = static_cast<std::size_t>(s.experts);
  dx = xt::zeros<double>({T, m});
  dw_router = xt::zeros<double>({m, E});
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = 0; j < m; ++j) {
      const double xj = in.x(first + i, j);
      double acc = 0;
      for (std::size_t e = 0; e < E; ++e) acc += cb.dl[i][e] * in.w_router(j, e);
      for (std::size_t k = 0; k < K; ++k)
        if (pk.slot[i][k] >= 0)
          acc += dx_back(static_cast<std::size_t>(pk.routes[i].experts[k]), static_cast<std::size_t>(pk.slot[i][k]), j);
      dx(i, j) = round_to(t, acc);
      for (std::size_t e = 0; e < E; ++e) dw_router(j, e) += xj * cb.dl[i][e];
    }
}

// The routing as this device took it, per token [T, k]: each choice's expert, its gate and its slot
// in the expert's buffer (-1: dropped); and the router's logits [T, E].
void add_routing(const Packed& pk, std::size_t K, Outputs& out) {
  const std::size_t T = pk.slot.size();
  Tensor experts = xt::zeros<double>({T, K}), gates = experts, slot = experts;
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t k = 0; k < K; ++k) {
      experts(i, k) = pk.routes[i].experts[k];
      gates(i, k) = pk.routes[i].gates[k];
      slot(i, k) = static_cast<double>(pk.slot[i][k]);
    }
  out["logits"] = pk.logits;
  out["experts"] = experts;
  out["gates"] = gates;
  out["slot"] = slot;
}

}  // namespace

Outputs moe_device(Device& dev, const MoeInputs& in, const MoeShape& s) {
  const Mesh& mesh = dev.mesh();
  const DType t = dev.dtype();
  const std::vector<std::string> all = mesh.names();
  const std::string ep = all.back();
  const std::vector<std::string> data(all.begin(), all.end() - 1);
  const int n = mesh.axis_size(ep);
  const std::size_t m = s.model, hid = s.hidden, E = static_cast<std::size_t>(s.experts);
  const std::size_t El = E / static_cast<std::size_t>(n), T = s.tokens / static_cast<std::size_t>(mesh.devices());
  const std::size_t C = moe_capacity(s, T), first = T * static_cast<std::size_t>(dev.id());
  const std::size_t slots = static_cast<std::size_t>(n) * C;  // an expert's slots on its device
  const std::size_t e0 = El * static_cast<std::size_t>(dev.coord(ep));

  // Forward: dispatch, the experts, combine.
  const Packed pk = route_and_pack(in, s, first, T, C, t);
  // Expert e's slots go to its device: [E/n, n C, m], slots from member 0 first.
  const Tensor xs = all_to_all(dev, pk.dispatch, {ep}, 0, 1, "x_dispatch");
  Tensor hs = xt::zeros<double>({El, slots, hid}), ys = xt::zeros<double>({El, slots, m});
  for (std::size_t el = 0; el < El; ++el)
    for (std::size_t q = 0; q < slots; ++q)
      expert_forward(in.w_in, in.w_out, e0 + el, &xs(el, q, 0), &hs(el, q, 0), &ys(el, q, 0), m, hid, t);
  const Tensor back = all_to_all(dev, ys, {ep}, 1, 0, "y_combine");  // [E, C, m] again
  const Combined cb = combine(pk, back, in, s, first, t);

  // Backward: dy to the experts, their backward, dx back to the tokens.
  const Tensor dy_in = all_to_all(dev, cb.dys, {ep}, 0, 1, "dy_dispatch");
  Tensor dxs = xt::zeros<double>({El, slots, m});
  Tensor dw_in = xt::zeros<double>({El, m, hid}), dw_out = xt::zeros<double>({El, hid, m});
  for (std::size_t el = 0; el < El; ++el)
    for (std::size_t q = 0; q < slots; ++q)
      expert_backward(in.w_in, in.w_out, e0 + el, &xs(el, q, 0), &hs(el, q, 0), &dy_in(el, q, 0), &dxs(el, q, 0),
                      &dw_in(el, 0, 0), &dw_out(el, 0, 0), m, hid, t);
  const Tensor dx_back = all_to_all(dev, dxs, {ep}, 1, 0, "dx_combine");
  Tensor dx, dw_router;
  token_gradients(pk, cb, dx_back, in, s, first, t, dx, dw_router);

  // Weights' gradients: the router's is replicated on every device, an expert's over the data axes.
  round_all(dw_router, t);
  round_all(dw_in, t);
  round_all(dw_out, t);
  dw_router = all_reduce(dev, dw_router, all, "dW_router");
  if (!data.empty()) {
    dw_in = all_reduce(dev, dw_in, data, "dW_in");
    dw_out = all_reduce(dev, dw_out, data, "dW_out");
  }
  Outputs out = {{"out", cb.out}, {"dx", dx}, {"dW_router", dw_router}, {"dW_in", dw_in}, {"dW_out", dw_out},
                 {"kept", pk.kept}, {"routed", pk.routed}};
  add_routing(pk, static_cast<std::size_t>(s.top_k), out);
  return out;
}

}  // namespace shardlab
