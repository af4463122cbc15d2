// Ring attention: the ring each device runs (its communication: K and V, then dK and dV, shifted
// round; the math of each block is in attention_block.cpp), the unsharded reference and the
// tolerances (harness/models/ring_attention.hpp).
#include "harness/models/ring_attention.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

#include "collectives/permute.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/text.hpp"
#include "core/trace.hpp"
#include "harness/cost/topology.hpp"
#include "harness/models/attention_block.hpp"

namespace shardlab {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<std::size_t> chunks_of(RingOrder order, int i, int n) { return ring_chunks(order, i, n); }

// Rows [chunk c] of a [S, d] tensor, for the chunks given, stacked.
Tensor rows_of(const Tensor& t, const std::vector<std::size_t>& chunks, std::size_t c) {
  const std::size_t d = t.shape()[1];
  Tensor out = xt::empty<double>(Shape{chunks.size() * c, d});
  for (std::size_t a = 0; a < chunks.size(); ++a)
    std::copy(t.data() + chunks[a] * c * d, t.data() + (chunks[a] + 1) * c * d, out.data() + a * c * d);
  return out;
}

// The ring as one device sees it: n devices over `axis`, this one the i-th, holding query
// chunks `mine` of c rows each.
struct Ring {
  Device& dev;
  std::string axis;
  RingOrder order;
  int n, i;
  std::size_t c;
  std::vector<std::size_t> mine;
};

// The device's tally: FLOPs of each pass and the most elements its arrays held at once (counted at
// each ring step, from the arrays the step holds: one [2c, d] block each, the statistics [2c] and
// the c x c scratch blocks).
struct Tally {
  double flops_fwd = 0, flops_bwd = 0;
  std::size_t peak = 0, block = 0, rows = 0, scratch = 0;
  void hold(std::size_t blocks, std::size_t statistics) {
    peak = std::max(peak, blocks * block + statistics * rows + scratch);
  }
};

// f(a, b, diagonal) for every block of query chunk a against key chunk b that the causal mask
// leaves (a key chunk after a query chunk is masked whole).
template <class F>
void each_unmasked_block(const std::vector<std::size_t>& queries, const std::vector<std::size_t>& keys, F f) {
  for (std::size_t a = 0; a < 2; ++a)
    for (std::size_t b = 0; b < 2; ++b)
      if (keys[b] <= queries[a]) f(a, b, keys[b] == queries[a]);
}

std::string step_text(int step, int i, int src) {
  return "step " + std::to_string(step) + ": queries of device " + std::to_string(i) + ", keys of device " +
         std::to_string(src);
}

// Forward: K and V go round the ring (n - 1 shifts by one); each step folds the blocks they bring.
AttentionForward ring_forward(const Ring& ring, const Tensor& q, Tensor k, Tensor v, const Tensor& dout, Tally& t) {
  const std::size_t d = q.shape()[1];
  OnlineSoftmax run(2 * ring.c, d);
  BlockScratch scratch(ring.c);
  int src = ring.i;  // whose keys and values this device holds
  for (int step = 0; step < ring.n; ++step) {
    {
      TraceSpan span("ring attention", [&] { return step_text(step, ring.i, src); });
      each_unmasked_block(ring.mine, chunks_of(ring.order, src, ring.n), [&](std::size_t a, std::size_t b, bool diag) {
        t.flops_fwd += 4.0 * ring.c * ring.c * d;
        attention_block_forward(q, k, v, a, b, ring.c, diag, run, scratch);
      });
      t.hold(4, 2);  // q, acc, k, v; m, l; one block of scores and p
    }
    if (step + 1 < ring.n) {
      t.hold(5, 2);  // the incoming block beside q, acc, k, v
      k = collective_shift(ring.dev, k, {ring.axis}, 1, "k");
      v = collective_shift(ring.dev, v, {ring.axis}, 1, "v");
      src = (src + ring.n - 1) % ring.n;
    }
  }
  return attention_finish(run, dout);
}

// Backward: K and V go round again, dK and dV travelling with them; one more shift brings those home.
void ring_backward(const Ring& ring, const Tensor& q, Tensor k, Tensor v, const Tensor& dout,
                   const AttentionForward& fwd, Tensor& dq, Tensor& dk, Tensor& dv, Tally& t) {
  const std::size_t d = q.shape()[1], rows = 2 * ring.c;
  BlockScratch scratch(ring.c);
  dq = xt::zeros<double>(Shape{rows, d});
  dk = xt::zeros<double>(Shape{rows, d});
  dv = xt::zeros<double>(Shape{rows, d});
  int src = ring.i;
  for (int step = 0; step < ring.n; ++step) {
    {
      TraceSpan span("ring attention backward", [&] { return step_text(step, ring.i, src); });
      each_unmasked_block(ring.mine, chunks_of(ring.order, src, ring.n), [&](std::size_t a, std::size_t b, bool diag) {
        t.flops_bwd += 10.0 * ring.c * ring.c * d;
        attention_block_backward(q, dout, k, v, fwd, a, b, ring.c, diag, dq, dk, dv, scratch);
      });
      t.hold(8, 2);  // q, dout, o, dq, k, v, dk, dv; lse, D; p and ds
    }
    t.hold(9, 2);  // one incoming block beside the eight
    if (step + 1 < ring.n) {
      k = collective_shift(ring.dev, k, {ring.axis}, 1, "k");
      v = collective_shift(ring.dev, v, {ring.axis}, 1, "v");
      src = (src + ring.n - 1) % ring.n;
    }
    dk = collective_shift(ring.dev, dk, {ring.axis}, 1, "dk");
    dv = collective_shift(ring.dev, dv, {ring.axis}, 1, "dv");
  }
}

}  // namespace

Outputs ring_attention_device(Device& dev, const RingInputs& in, const RingConfig& cfg, RingOrder order,
                              const std::string& X) {
  const int n = dev.mesh().axis_size(X), i = dev.coord(X);
  const std::size_t c = cfg.chunk, d = cfg.head;
  const Ring ring{dev, X, order, n, i, c, chunks_of(order, i, n)};
  const Tensor q = rows_of(in.q, ring.mine, c), dout = rows_of(in.dout, ring.mine, c);
  Tally t;
  t.block = 2 * c * d, t.rows = 2 * c, t.scratch = 2 * c * c;
  const AttentionForward fwd = ring_forward(ring, q, rows_of(in.k, ring.mine, c), rows_of(in.v, ring.mine, c), dout, t);
  Tensor dq, dk, dv;
  ring_backward(ring, q, rows_of(in.k, ring.mine, c), rows_of(in.v, ring.mine, c), dout, fwd, dq, dk, dv, t);
  return {{"o", fwd.o}, {"dq", dq}, {"dk", dk}, {"dv", dv}, {"flops", Tensor{t.flops_fwd, t.flops_bwd}},
          {"peak_bytes", Tensor{double(t.peak * dev.element_bytes())}}};
}

namespace {

// Unsharded causal attention and its gradients in float64, with the elementwise bounds the
// tolerances are built from.
struct Reference {
  Tensor o, dq, dk, dv;              // [S, d]
  Tensor o_abs, dq_abs, dk_abs, dv_abs;  // sums of |terms| of each element
  Tensor P, dS, A;                   // [S, S]: probabilities, dS = P (dP - D), A = P (|dP| + |D|)
};

Reference reference(const RingInputs& in) {
  const std::size_t S = in.q.shape()[0], d = in.q.shape()[1];
  const double scale = 1.0 / std::sqrt(double(d));
  Reference R;
  R.P = xt::zeros<double>(Shape{S, S});
  R.dS = xt::zeros<double>(Shape{S, S});
  R.A = xt::zeros<double>(Shape{S, S});
  for (Tensor* t : {&R.o, &R.dq, &R.dk, &R.dv, &R.o_abs, &R.dq_abs, &R.dk_abs, &R.dv_abs})
    *t = xt::zeros<double>(Shape{S, d});
  for (std::size_t r = 0; r < S; ++r) {
    std::vector<double> x(r + 1);
    double top = -kInf, z = 0;
    for (std::size_t j = 0; j <= r; ++j) {
      x[j] = 0;
      for (std::size_t e = 0; e < d; ++e) x[j] += in.q(r, e) * in.k(j, e);
      x[j] *= scale;
      top = std::max(top, x[j]);
    }
    for (std::size_t j = 0; j <= r; ++j) z += std::exp(x[j] - top);
    for (std::size_t j = 0; j <= r; ++j) R.P(r, j) = std::exp(x[j] - top) / z;
    for (std::size_t j = 0; j <= r; ++j)
      for (std::size_t e = 0; e < d; ++e) {
        R.o(r, e) += R.P(r, j) * in.v(j, e);
        R.o_abs(r, e) += R.P(r, j) * std::abs(in.v(j, e));
      }
    double D = 0;
    for (std::size_t e = 0; e < d; ++e) D += in.dout(r, e) * R.o(r, e);
    for (std::size_t j = 0; j <= r; ++j) {
      double dp = 0;
      for (std::size_t e = 0; e < d; ++e) dp += in.dout(r, e) * in.v(j, e);
      R.dS(r, j) = R.P(r, j) * (dp - D);
      R.A(r, j) = R.P(r, j) * (std::abs(dp) + std::abs(D));
    }
  }
  for (std::size_t r = 0; r < S; ++r)
    for (std::size_t j = 0; j <= r; ++j)
      for (std::size_t e = 0; e < d; ++e) {
        R.dq(r, e) += R.dS(r, j) * in.k(j, e) * scale;
        R.dq_abs(r, e) += R.A(r, j) * std::abs(in.k(j, e)) * scale;
        R.dk(j, e) += R.dS(r, j) * in.q(r, e) * scale;
        R.dk_abs(j, e) += R.A(r, j) * std::abs(in.q(r, e)) * scale;
        R.dv(j, e) += R.P(r, j) * in.dout(r, e);
        R.dv_abs(j, e) += R.P(r, j) * std::abs(in.dout(r, e));
      }
  return R;
}

// The roundings of dK and dV on the wire: the partial sum for key block b leaves device b + s
// after its queries have added theirs (s = 0 .. n-1), and is rounded to the wire's type each time.
// Each rounding is within u of the partial sum; the tolerance adds them up.
void wire_tolerance(const Reference& R, const RingInputs& in, RingOrder order, int n, std::size_t chunk, double u,
                    Tensor& tk, Tensor& tv) {
  const std::size_t d = in.q.shape()[1];
  const double scale = 1.0 / std::sqrt(double(d));
  for (int b = 0; b < n; ++b) {
    std::vector<double> pk(2 * chunk * d, 0.0), pv(2 * chunk * d, 0.0);
    const std::vector<std::size_t> keys = chunks_of(order, b, n);
    for (int s = 0; s < n; ++s) {
      const std::vector<std::size_t> queries = chunks_of(order, (b + s) % n, n);
      for (std::size_t kb = 0; kb < 2; ++kb)
        for (std::size_t j0 = 0; j0 < chunk; ++j0) {
          const std::size_t j = keys[kb] * chunk + j0;
          for (std::size_t qa = 0; qa < 2; ++qa)
            for (std::size_t r0 = 0; r0 < chunk; ++r0) {
              const std::size_t r = queries[qa] * chunk + r0;
              if (j > r) continue;
              for (std::size_t e = 0; e < d; ++e) {
                pk[(kb * chunk + j0) * d + e] += R.dS(r, j) * in.q(r, e) * scale;
                pv[(kb * chunk + j0) * d + e] += R.P(r, j) * in.dout(r, e);
              }
            }
          for (std::size_t e = 0; e < d; ++e) {
            tk(j, e) += u * std::abs(pk[(kb * chunk + j0) * d + e]);
            tv(j, e) += u * std::abs(pv[(kb * chunk + j0) * d + e]);
          }
        }
    }
  }
}

// Stitches output `name` back into sequence order from every device's two chunks.
Tensor stitch(const RunResult& run, const std::string& name, RingOrder order, int n, std::size_t chunk,
              std::size_t head) {
  Tensor out = xt::zeros<double>(Shape{2 * std::size_t(n) * chunk, head});
  for (int i = 0; i < n; ++i) {
    const Tensor& t = run.outputs[i].at(name);
    const std::vector<std::size_t> ch = chunks_of(order, i, n);
    for (std::size_t a = 0; a < 2; ++a)
      std::copy(t.data() + a * chunk * head, t.data() + (a + 1) * chunk * head, out.data() + ch[a] * chunk * head);
  }
  return out;
}

}  // namespace

RingOrder parse_ring_order(const std::string& text) {
  if (text == "contiguous") return RingOrder::contiguous;
  if (text == "balanced") return RingOrder::balanced;
  throw Error(ErrorKind::parse, "the order '" + text + "' is not known; give contiguous or balanced");
}

std::string ring_order_name(RingOrder o) { return o == RingOrder::contiguous ? "contiguous" : "balanced"; }

void check_ring(const RingConfig& c) {
  if (c.devices < 2)
    throw Error(ErrorKind::parse, "ring attention needs a ring of at least 2 devices, not " + std::to_string(c.devices));
  if (c.devices > kMaxRingDevices)
    throw Error(ErrorKind::unsupported, "a ring of " + std::to_string(c.devices) + " devices is more than the " +
                                            std::to_string(kMaxRingDevices) +
                                            " ring attention runs here (its n - 1 steps each wait for all n devices)");
  if (c.chunk < 1 || c.head < 1)
    throw Error(ErrorKind::parse, "the chunk and the head size must be at least 1, not " + std::to_string(c.chunk) +
                                      " and " + std::to_string(c.head));
  const double S = 2.0 * c.devices * double(c.chunk), work = S * S * double(c.head);
  if (work > kMaxRingWork)
    throw Error(ErrorKind::unsupported, "S^2 d = " + format_number(work, "%.3g") + " (S = " + format_number(S, "%.0f") +
                                            " tokens, d = " + std::to_string(c.head) + ") is past the unsharded reference's " +
                                            "limit of 2^24 = 1.68e+07 (about 10 s here); give a smaller chunk or head");
  refuse_if_over_memory(double(ring_run_bytes(c)), "this ring", "give a smaller chunk or head");
}

std::size_t ring_run_bytes(const RingConfig& c) {
  // The inputs, the reference's plain attention and every device's peak, all in float64.
  const std::size_t n = std::size_t(c.devices);
  return 4 * c.tokens() * c.head * 8 + plain_attention_bytes(c, 8) + n * ring_peak_bytes(c, 8);
}

std::size_t ring_peak_bytes(const RingConfig& c, std::size_t eb) {
  return (9 * c.block_elements() + 2 * 2 * c.chunk + 2 * c.chunk * c.chunk) * eb;
}

std::vector<std::size_t> ring_chunks(RingOrder o, int i, int n) {
  if (o == RingOrder::contiguous) return {2 * std::size_t(i), 2 * std::size_t(i) + 1};
  return {std::size_t(i), std::size_t(2 * n - 1 - i)};
}

RingInputs ring_inputs(const RingConfig& c, DType t) {
  RingInputs in;
  Tensor* all[] = {&in.q, &in.k, &in.v, &in.dout};
  for (int i = 0; i < 4; ++i) {
    *all[i] = random_uniform(Shape{c.tokens(), c.head}, c.seed * 7919 + 19 + std::uint64_t(i), -1.0, 1.0);
    for (auto& x : *all[i]) x = round_to(t, x);
  }
  return in;
}

std::size_t ring_forward_bytes(const RingConfig& c, std::size_t eb) {
  return 2 * std::size_t(c.devices - 1) * c.block_elements() * eb;
}

std::size_t ring_backward_bytes(const RingConfig& c, std::size_t eb) {
  return (4 * std::size_t(c.devices - 1) + 2) * c.block_elements() * eb;
}

std::size_t plain_attention_bytes(const RingConfig& c, std::size_t eb) {
  const std::size_t S = c.tokens();
  return (8 * S * c.head + 2 * S * S + 2 * S) * eb;
}

std::vector<Verdict> ring_attention_checks(const RunResult& run, const RingInputs& in, const RingConfig& c,
                                           RingOrder o, DType wire, const std::string& prefix) {
  const Reference R = reference(in);
  const double work = 32.0 * double(c.tokens() + c.head + 4) * DBL_EPSILON;
  const double u = wire == DType::float64 ? 0.0 : unit_roundoff(wire) * 1.01;
  Tensor tk = R.dk_abs * work, tv = R.dv_abs * work;
  wire_tolerance(R, in, o, c.devices, c.chunk, u, tk, tv);
  const Tensor to = R.o_abs * work, tq = R.dq_abs * work;
  auto got = [&](const char* name) { return stitch(run, name, o, c.devices, c.chunk, c.head); };
  return {compare(prefix + "O", got("o"), R.o, to), compare(prefix + "dQ", got("dq"), R.dq, tq),
          compare(prefix + "dK", got("dk"), R.dk, tk), compare(prefix + "dV", got("dv"), R.dv, tv)};
}

RingStepCost ring_step_cost(double tokens, int devices, double width, const Hardware& hw) {
  const double n = devices, c = tokens / (2 * n);
  const double kv = 2 * (tokens / n) * width * hw.element_bytes;
  return {topology_seconds("collective_permute", {devices}, kv, hw),
          compute_seconds((2 * n + 1) / n * 4 * c * c * width, hw)};
}

}  // namespace shardlab
