// Lesson 19 - context parallelism by ring attention (Liu, Zaharia and Abbeel 2023, "Ring Attention
// with Blockwise Transformers"; the causal load balance as in Megatron-Core's context parallelism).
//
// One idea: split the sequence over a ring of n devices and keep each device's queries where they
// are; pass the keys and values around the ring instead, one block per step, n - 1 steps with
// collective_permute (a shift by one). Each device folds every key/value block that visits into
// its queries' attention with the online softmax (a running max m and sum l per query row; a
// larger max rescales what was summed so far by exp(m_old - m_new)), so no device ever holds the
// whole sequence or more than one block of scores. With causal masking a device whose queries
// come early has little to do; cutting the sequence into 2n chunks and giving device i chunks i
// and 2n-1-i gives every device the same number of unmasked blocks.
//
// The backward passes keys, values and their gradients' partial sums around the ring: each
// device adds its queries' share to the dK, dV that travel with the block, and after the last
// step one more shift brings them home.
//
// Run:    build/bin/19_context_parallel [--mesh X=4] [--dtype float32|float64|bfloat16] [--json]
//         [--trace FILE] [--inject KIND]
//         mpiexec -n 4 build/bin/19_context_parallel --backend mpi
// Prints: the chunks each device holds; FLOPs per device in two orders; bytes per device from
//         the ledger against the formula; memory per device against plain attention's; the
//         comparison with lesson 12's layout by keys; the cost model's time per ring step at 128k
//         tokens on 8 devices; the verdict of O, dQ, dK, dV against unsharded attention.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "collectives/permute.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "core/trace.hpp"
#include "harness/check/session.hpp"
#include "harness/check/table.hpp"
#include "harness/check/verify.hpp"
#include "harness/cli/cli.hpp"
#include "harness/cost/cost.hpp"
#include "harness/cost/topology.hpp"
#include "harness/models/case_run.hpp"

using namespace shardlab;

namespace {

constexpr std::size_t kChunk = 8;  // tokens per chunk; the sequence is 2n chunks
constexpr std::size_t kHead = 16;  // d, the head size
constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Order { contiguous, balanced };

// The chunks device i holds: 2i and 2i+1, or i and 2n-1-i.
std::vector<std::size_t> chunks_of(Order order, int i, int n) {
  if (order == Order::contiguous) return {2 * std::size_t(i), 2 * std::size_t(i) + 1};
  return {std::size_t(i), std::size_t(2 * n - 1 - i)};
}

// Rows [chunk c] of a [S, d] tensor, for the chunks given, stacked.
Tensor rows_of(const Tensor& t, const std::vector<std::size_t>& chunks) {
  const std::size_t d = t.shape()[1];
  Tensor out = xt::empty<double>(Shape{chunks.size() * kChunk, d});
  for (std::size_t a = 0; a < chunks.size(); ++a)
    std::copy(t.data() + chunks[a] * kChunk * d, t.data() + (chunks[a] + 1) * kChunk * d, out.data() + a * kChunk * d);
  return out;
}

struct Inputs {
  Tensor q, k, v, dout;  // [S, d], rounded to the run's element type
};

Inputs inputs(std::size_t S, std::uint64_t seed, DType t) {
  Inputs in;
  Tensor* all[] = {&in.q, &in.k, &in.v, &in.dout};
  for (int i = 0; i < 4; ++i) {
    *all[i] = random_uniform(Shape{S, kHead}, seed * 7919 + 19 + std::uint64_t(i), -1.0, 1.0);
    for (auto& x : *all[i]) x = round_to(t, x);
  }
  return in;
}

// One device's ring attention, forward and backward. Outputs o, dq, dk, dv (its chunks' rows),
// flops [forward, backward], peak_bytes.
Outputs ring_attention(Device& dev, const Inputs& in, Order order, const std::string& X) {
  const int n = dev.mesh().axis_size(X), i = dev.coord(X);
  const std::size_t c = kChunk, d = kHead, rows = 2 * c;
  const double scale = 1.0 / std::sqrt(double(d));
  const std::vector<std::size_t> mine = chunks_of(order, i, n);
  const Tensor q = rows_of(in.q, mine), dout = rows_of(in.dout, mine);
  Tensor k = rows_of(in.k, mine), v = rows_of(in.v, mine);
  double flops_fwd = 0, flops_bwd = 0;
  std::size_t peak = 0;
  auto hold = [&](std::size_t elements) { peak = std::max(peak, elements); };
  const std::size_t block = rows * d;  // one [2c, d] block

  // Forward: running max m, running sum l, unnormalised output acc.
  std::vector<double> m(rows, -kInf), l(rows, 0.0);
  Tensor acc = xt::zeros<double>(Shape{rows, d});
  std::vector<double> s(c * c), p(c * c);
  int src = i;  // whose keys and values this device holds
  for (int step = 0; step < n; ++step) {
    {
      TraceSpan span("ring attention", [&] {
        return "step " + std::to_string(step) + ": queries of device " + std::to_string(i) + ", keys of device " +
               std::to_string(src);
      });
      const std::vector<std::size_t> theirs = chunks_of(order, src, n);
      for (std::size_t a = 0; a < 2; ++a)
        for (std::size_t b = 0; b < 2; ++b) {
          if (theirs[b] > mine[a]) continue;  // every key after every query: masked whole
          const bool diagonal = theirs[b] == mine[a];
          flops_fwd += 4.0 * c * c * d;
          for (std::size_t r = 0; r < c; ++r) {
            const std::size_t qr = a * c + r;
            double top = m[qr];
            for (std::size_t j = 0; j < c; ++j) {
              double x = -kInf;
              if (!diagonal || j <= r) {
                x = 0;
                for (std::size_t e = 0; e < d; ++e) x += q(qr, e) * k(b * c + j, e);
                x *= scale;
              }
              s[r * c + j] = x;
              top = std::max(top, x);
            }
            const double rescale = std::exp(m[qr] - top);
            double sum = 0;
            for (std::size_t j = 0; j < c; ++j) sum += p[r * c + j] = std::exp(s[r * c + j] - top);
            l[qr] = l[qr] * rescale + sum;
            m[qr] = top;
            for (std::size_t e = 0; e < d; ++e) {
              double pv = 0;
              for (std::size_t j = 0; j < c; ++j) pv += p[r * c + j] * v(b * c + j, e);
              acc(qr, e) = acc(qr, e) * rescale + pv;
            }
          }
        }
      hold(4 * block + 2 * rows + 2 * c * c);  // q, acc, k, v; m, l; one block of scores and p
    }
    if (step + 1 < n) {
      hold(5 * block + 2 * rows + 2 * c * c);  // the incoming block beside q, acc, k, v
      k = collective_shift(dev, k, {X}, 1, "k");
      v = collective_shift(dev, v, {X}, 1, "v");
      src = (src + n - 1) % n;
    }
  }
  Tensor o = xt::empty<double>(Shape{rows, d});
  std::vector<double> lse(rows), D(rows, 0.0);
  std::vector<double>& ds = s;  // the backward's dS block reuses the scores' buffer
  for (std::size_t r = 0; r < rows; ++r) {
    lse[r] = m[r] + std::log(l[r]);
    for (std::size_t e = 0; e < d; ++e) {
      o(r, e) = acc(r, e) / l[r];
      D[r] += dout(r, e) * o(r, e);
    }
  }
  acc = Tensor();
  m.clear();
  l.clear();

  // Backward: dK and dV travel with their keys and values and come home after one more shift.
  k = rows_of(in.k, mine);
  v = rows_of(in.v, mine);
  Tensor dq = xt::zeros<double>(Shape{rows, d}), dk = xt::zeros<double>(Shape{rows, d}),
         dv = xt::zeros<double>(Shape{rows, d});
  src = i;
  for (int step = 0; step < n; ++step) {
    {
      TraceSpan span("ring attention backward", [&] {
        return "step " + std::to_string(step) + ": queries of device " + std::to_string(i) + ", keys of device " +
               std::to_string(src);
      });
      const std::vector<std::size_t> theirs = chunks_of(order, src, n);
      for (std::size_t a = 0; a < 2; ++a)
        for (std::size_t b = 0; b < 2; ++b) {
          if (theirs[b] > mine[a]) continue;
          const bool diagonal = theirs[b] == mine[a];
          flops_bwd += 10.0 * c * c * d;
          for (std::size_t r = 0; r < c; ++r) {
            const std::size_t qr = a * c + r;
            for (std::size_t j = 0; j < c; ++j) {
              double pr = 0, dp = 0;
              if (!diagonal || j <= r) {
                double x = 0;
                for (std::size_t e = 0; e < d; ++e) x += q(qr, e) * k(b * c + j, e);
                pr = std::exp(x * scale - lse[qr]);
                for (std::size_t e = 0; e < d; ++e) dp += dout(qr, e) * v(b * c + j, e);
              }
              p[r * c + j] = pr;
              ds[r * c + j] = pr * (dp - D[qr]);
            }
          }
          for (std::size_t r = 0; r < c; ++r)
            for (std::size_t j = 0; j < c; ++j) {
              const double pr = p[r * c + j], g = ds[r * c + j] * scale;
              for (std::size_t e = 0; e < d; ++e) {
                dv(b * c + j, e) += pr * dout(a * c + r, e);
                dq(a * c + r, e) += g * k(b * c + j, e);
                dk(b * c + j, e) += g * q(a * c + r, e);
              }
            }
        }
      // q, dout, o, dq, k, v, dk, dv; lse, D; p and ds
      hold(8 * block + 2 * rows + 2 * c * c);
    }
    hold(9 * block + 2 * rows + 2 * c * c);  // one incoming block beside the eight
    if (step + 1 < n) {
      k = collective_shift(dev, k, {X}, 1, "k");
      v = collective_shift(dev, v, {X}, 1, "v");
      src = (src + n - 1) % n;
    }
    dk = collective_shift(dev, dk, {X}, 1, "dk");
    dv = collective_shift(dev, dv, {X}, 1, "dv");
  }
  return {{"o", o},   {"dq", dq}, {"dk", dk}, {"dv", dv}, {"flops", Tensor{flops_fwd, flops_bwd}},
          {"peak_bytes", Tensor{double(peak * dev.element_bytes())}}};
}

// Unsharded causal attention and its gradients in float64, with the elementwise bounds the
// tolerances are built from.
struct Reference {
  Tensor o, dq, dk, dv;              // [S, d]
  Tensor o_abs, dq_abs, dk_abs, dv_abs;  // sums of |terms| of each element
  Tensor P, dS, A;                   // [S, S]: probabilities, dS = P (dP - D), A = P (|dP| + |D|)
};

Reference reference(const Inputs& in) {
  const std::size_t S = in.q.shape()[0], d = kHead;
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
void wire_tolerance(const Reference& R, const Inputs& in, Order order, int n, double u, Tensor& tk, Tensor& tv) {
  const std::size_t d = kHead;
  const double scale = 1.0 / std::sqrt(double(d));
  for (int b = 0; b < n; ++b) {
    std::vector<double> pk(2 * kChunk * d, 0.0), pv(2 * kChunk * d, 0.0);
    const std::vector<std::size_t> keys = chunks_of(order, b, n);
    for (int s = 0; s < n; ++s) {
      const std::vector<std::size_t> queries = chunks_of(order, (b + s) % n, n);
      for (std::size_t kb = 0; kb < 2; ++kb)
        for (std::size_t j0 = 0; j0 < kChunk; ++j0) {
          const std::size_t j = keys[kb] * kChunk + j0;
          for (std::size_t qa = 0; qa < 2; ++qa)
            for (std::size_t r0 = 0; r0 < kChunk; ++r0) {
              const std::size_t r = queries[qa] * kChunk + r0;
              if (j > r) continue;
              for (std::size_t e = 0; e < d; ++e) {
                pk[(kb * kChunk + j0) * d + e] += R.dS(r, j) * in.q(r, e) * scale;
                pv[(kb * kChunk + j0) * d + e] += R.P(r, j) * in.dout(r, e);
              }
            }
          for (std::size_t e = 0; e < d; ++e) {
            tk(j, e) += u * std::abs(pk[(kb * kChunk + j0) * d + e]);
            tv(j, e) += u * std::abs(pv[(kb * kChunk + j0) * d + e]);
          }
        }
    }
  }
}

// Stitches output `name` back into sequence order from every device's two chunks.
Tensor stitch(const RunResult& run, const std::string& name, Order order, int n) {
  Tensor out = xt::zeros<double>(Shape{2 * std::size_t(n) * kChunk, kHead});
  for (int i = 0; i < n; ++i) {
    const Tensor& t = run.outputs[i].at(name);
    const std::vector<std::size_t> ch = chunks_of(order, i, n);
    for (std::size_t a = 0; a < 2; ++a)
      std::copy(t.data() + a * kChunk * kHead, t.data() + (a + 1) * kChunk * kHead, out.data() + ch[a] * kChunk * kHead);
  }
  return out;
}

std::string num(double x) { return format_number(x, "%.4g"); }

}  // namespace

int main(int argc, char** argv) {
  Cli cli("19_context_parallel", "Lesson 19: context parallelism by ring attention, causal, load-balanced", "X=4");
  cli.mesh_follows_processes("X");
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    Session session("19_context_parallel", cli.common);
    const Mesh& mesh = session.mesh();
    if (mesh.rank() != 1 || mesh.devices() < 2)
      throw Error(ErrorKind::parse, "lesson 19 needs a ring of at least 2 devices on one axis, like X=4, not " +
                                        mesh.text());
    const std::string X = mesh.names()[0];
    const int n = mesh.devices();
    const std::size_t S = 2 * std::size_t(n) * kChunk, d = kHead, eb = session.element_bytes();
    const Inputs in = inputs(S, cli.common.seed, session.dtype());
    auto& out = session.out();
    out << "1. Ring " << mesh.text() << ": one causal attention head, S = " << S << " tokens, head size d = " << d
        << ",\n   cut into 2n = " << 2 * n << " chunks of " << kChunk << " tokens. Each device keeps its queries; "
        << "keys and values\n   go round the ring, n - 1 = " << n - 1 << " shifts by one (collective_permute).\n";
    Table own({"device", "contiguous order", "balanced order"});
    for (int i = 0; i < n; ++i) {
      auto text = [&](Order o) {
        const auto ch = chunks_of(o, i, n);
        return "chunks " + std::to_string(ch[0]) + ", " + std::to_string(ch[1]);
      };
      own.add({std::to_string(i), text(Order::contiguous), text(Order::balanced)});
    }
    out << own.text() << "\n";

    const Order orders[] = {Order::contiguous, Order::balanced};
    const char* names[] = {"contiguous", "balanced"};
    std::vector<RunResult> runs;
    for (Order o : orders) runs.push_back(session.run([&](Device& dev) { return ring_attention(dev, in, o, X); }));
    if (!session.runtime().is_root()) return session.finish();
    Report& report = session.report();
    auto claim = [&](const std::string& name, bool pass, const std::string& detail) {
      Verdict v;
      v.name = name;
      v.pass = pass;
      v.detail = pass ? "" : detail;
      report.checks.push_back(v);
      out << "   " << name << ": " << check_text(v) << "\n";
    };

    // FLOPs per device: counted by the devices as they skip the blocks the mask hides whole.
    const double block_fwd = 4.0 * kChunk * kChunk * d, block_bwd = 10.0 * kChunk * kChunk * d;
    out << "2. FLOPs per device (a block of " << kChunk << " queries x " << kChunk << " keys: " << num(block_fwd)
        << " forward, " << num(block_bwd) << " backward;\n   blocks of keys wholly after the queries are skipped):\n";
    Table fl({"device", "contiguous fwd", "contiguous bwd", "balanced fwd", "balanced bwd"});
    double spread[2] = {0, 0};
    for (int i = 0; i < n; ++i) {
      std::vector<std::string> row = {std::to_string(i)};
      for (int o = 0; o < 2; ++o)
        for (int w = 0; w < 2; ++w) row.push_back(num(runs[o].outputs[i].at("flops")(w)));
      fl.add(row);
    }
    for (int o = 0; o < 2; ++o) {
      double lo = kInf, hi = 0;
      for (int i = 0; i < n; ++i) {
        lo = std::min(lo, runs[o].outputs[i].at("flops")(0));
        hi = std::max(hi, runs[o].outputs[i].at("flops")(0));
      }
      spread[o] = hi - lo;
      report.numbers[std::string(names[o]) + "_flops_spread"] = spread[o];
    }
    out << fl.text();
    out << "   contiguous: device i has 4i + 3 unmasked blocks (the last device " << 4 * n - 1
        << ", the first 3);\n   balanced: every device has (i + 1) + (2n - i) = 2n + 1 = " << 2 * n + 1 << ".\n";
    claim("balanced order: forward FLOPs equal on every device within one block", spread[1] <= block_fwd,
          "spread " + num(spread[1]) + " against one block's " + num(block_fwd));
    claim("contiguous order: the last device does " + std::to_string(4 * n - 1) + "/3 of the first's work",
          spread[0] == (4.0 * n - 4) * block_fwd, "spread " + num(spread[0]));
    out << "\n";

    // Bytes per device: the ledger's rows of the balanced run against the formula.
    const std::size_t blk = 2 * kChunk * d * eb;  // one device's [2c, d] block on the wire
    const std::size_t fwd_formula = 2 * std::size_t(n - 1) * blk, bwd_formula = (4 * std::size_t(n - 1) + 2) * blk;
    std::vector<std::size_t> fwd_sent(n, 0), bwd_sent(n, 0);
    for (const auto& row : runs[1].ledger) {
      const bool forward = row.call < 2 * (n - 1);
      (forward ? fwd_sent : bwd_sent)[row.device] += row.bytes_sent;
    }
    out << "3. Bytes per device (ledger; one block [" << 2 * kChunk << ", " << d << "] = " << blk << " B):\n";
    Table by({"device", "forward", "formula 2(n-1) B", "backward", "formula (4(n-1)+2) B"});
    bool bytes_ok = true;
    for (int i = 0; i < n; ++i) {
      by.add({std::to_string(i), std::to_string(fwd_sent[i]), std::to_string(fwd_formula), std::to_string(bwd_sent[i]),
              std::to_string(bwd_formula)});
      bytes_ok = bytes_ok && fwd_sent[i] == fwd_formula && bwd_sent[i] == bwd_formula;
    }
    out << by.text();
    out << "   forward: K and V, n - 1 shifts each; backward: K and V n - 1 times, dK and dV n times\n"
        << "   (the last shift brings each block's gradient home).\n";
    claim("bytes per device equal the formula, forward and backward", bytes_ok,
          "device 0 sent " + std::to_string(fwd_sent[0]) + " + " + std::to_string(bwd_sent[0]));
    report.numbers["forward_bytes_per_device"] = double(fwd_sent[0]);
    report.numbers["backward_bytes_per_device"] = double(bwd_sent[0]);
    report.numbers["forward_bytes_formula"] = double(fwd_formula);
    report.numbers["backward_bytes_formula"] = double(bwd_formula);
    out << "\n";

    // Memory per device against plain attention on one device.
    double peak = 0;
    for (int i = 0; i < n; ++i) peak = std::max(peak, runs[1].outputs[i].at("peak_bytes")(0));
    const double plain = double(8 * S * d + 2 * S * S + 2 * S) * double(eb);
    const double plain_scores = double(S * S * eb), ring_scores = double(kChunk * kChunk * eb);
    out << "4. Memory per device (held at the peak, " << eb << " B elements):\n";
    Table mem({"", "scores at once", "peak held"});
    mem.add({"plain attention, 1 device", std::to_string(std::size_t(plain_scores)), std::to_string(std::size_t(plain))});
    mem.add({"ring attention, per device", std::to_string(std::size_t(ring_scores)), std::to_string(std::size_t(peak))});
    out << mem.text();
    out << "   plain: q k v o dO dq dk dv [S, d], P and dS [S, S], two statistics [S]; ring: the same\n"
        << "   [2c, d] blocks, one incoming, and one [c, c] block of scores at a time. The scores fall\n"
        << "   as 1/(2n)^2; the whole peak at least as 1/n.\n";
    report.numbers["peak_bytes_per_device"] = peak;
    report.numbers["plain_peak_bytes"] = plain;
    claim("peak memory per device at most 1/" + std::to_string(n) + " of plain attention's", peak * n <= plain,
          num(peak) + " B x " + std::to_string(n) + " > " + num(plain) + " B");
    out << "\n";

    // Lesson 12's layout by keys, for the same head: every device holds all S queries and an
    // [S, S/n] slab of scores; it all-reduces the row max [S], the row sum [S] and p v [S, d].
    const double frac = 2.0 * (n - 1) / n;
    const double keys_bytes = frac * double(2 * S + S * d) * double(eb);
    out << "5. Beside lesson 12's layout by keys (same head, forward):\n";
    Table cmp({"layout", "collectives", "bytes/device", "scores held"});
    cmp.add({"by keys (lesson 12)", "all_reduce_max m, all_reduce z, all_reduce o", num(keys_bytes),
             "[" + std::to_string(S) + ", " + std::to_string(S / n) + "]"});
    cmp.add({"ring (here)", std::to_string(2 * (n - 1)) + " collective_permute", std::to_string(fwd_formula),
             "[" + std::to_string(kChunk) + ", " + std::to_string(kChunk) + "]"});
    out << cmp.text();
    out << "   By keys, each softmax row is spread over the devices, so its max and sum are completed\n"
        << "   by all_reduce; every device holds every query and 1/n of the score matrix. The ring\n"
        << "   moves about the same bytes but keeps each softmax row on one device, folding blocks in\n"
        << "   with the online softmax: 1/n of the queries and one small block of scores at a time.\n\n";

    // The cost model at a real size: 128k tokens, 8 devices, 32 heads of 128.
    {
      const double St = 131072, nn = 8, width = 32 * 128, c = St / (2 * nn);
      out << "6. Cost model, one forward ring step at S = 128k tokens on 8 devices, 32 heads of 128\n"
          << "   (K and V blocks of [" << num(St / nn) << ", " << num(width) << "]; balanced: (2n+1)/n blocks of "
          << num(c) << " x " << num(c) << " per step on average):\n";
      Table cost({"preset", "wiring", "transfer_us", "compute_us", "hidden"});
      for (const auto& hw : hardware_presets()) {
        if (hw.name == "this-machine") continue;
        const double kv = 2 * (St / nn) * width * hw.element_bytes;
        const double t_move = topology_seconds("collective_permute", {int(nn)}, kv, hw);
        const double t_comp = compute_seconds((2 * nn + 1) / nn * 4 * c * c * width, hw);
        cost.add({hw.name, topology_text(hw), num(t_move * 1e6), num(t_comp * 1e6), t_comp >= t_move ? "yes" : "no"});
      }
      out << cost.text();
      out << "   When a step's compute takes longer than its transfer, an asynchronous permute hides\n"
          << "   the ring entirely. Here collective_permute waits, so the trace (--trace FILE) shows\n"
          << "   each step's transfer and compute one after the other.\n\n";
    }

    // Verdict: both orders against unsharded attention.
    out << "7. Verdict against unsharded causal attention (float64 reference, inputs in " << dtype_name(session.dtype())
        << "):\n";
    const Reference R = reference(in);
    const double eps = DBL_EPSILON, work = 32.0 * double(S + d + 4) * eps;
    const double u_wire = session.dtype() == DType::float64 ? 0.0 : unit_roundoff(session.dtype()) * 1.01;
    for (int o = 0; o < 2; ++o) {
      Tensor tk = R.dk_abs * work, tv = R.dv_abs * work;
      wire_tolerance(R, in, orders[o], n, u_wire, tk, tv);
      const Tensor to = R.o_abs * work, tq = R.dq_abs * work;
      const std::string pre = std::string(names[o]) + " ";
      const Verdict vs[] = {compare(pre + "O", stitch(runs[o], "o", orders[o], n), R.o, to),
                            compare(pre + "dQ", stitch(runs[o], "dq", orders[o], n), R.dq, tq),
                            compare(pre + "dK", stitch(runs[o], "dk", orders[o], n), R.dk, tk),
                            compare(pre + "dV", stitch(runs[o], "dv", orders[o], n), R.dv, tv)};
      for (const Verdict& v : vs) {
        report.checks.push_back(v);
        out << "   " << v.name << ": " << check_text(v) << "\n";
      }
    }
    out << "   Tolerances per element: 32 (S + d + 4) eps times the sum of |terms| of that element (the\n"
        << "   orders of float64 sums differ); dK and dV add u of the wire's type times each partial\n"
        << "   sum they carried round the ring. In bfloat16 those n roundings of 2^-8 are real error,\n"
        << "   so dK and dV can only be checked loosely (WEAK): frameworks carry them in float32.\n";
    out << "\nTakeaway: ring attention splits the sequence, keeps the softmax rows whole on their\n"
           "          devices and passes keys and values instead; the online softmax makes the blocks\n"
           "          add up, and the balanced order gives every device the same causal work.\n";
    return session.finish();
  });
}
