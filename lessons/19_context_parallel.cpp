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
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/text.hpp"
#include "harness/check/session.hpp"
#include "core/table.hpp"
#include "harness/check/verify.hpp"
#include "harness/cli/cli.hpp"
#include "harness/cost/cost.hpp"
#include "harness/cost/topology.hpp"
#include "harness/models/case_run.hpp"
#include "harness/models/ring_attention.hpp"

using namespace shardlab;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string num(double x) { return format_number(x, "%.4g"); }

// A preset's matmul rate in element type t: the presets give the bfloat16 peak. A TPU runs float32
// matmuls at it too (XLA's default precision is one bfloat16 pass) and has no float64 unit (0: not
// priced); an A100 runs float32 at 19.5 TFLOP/s (no TF32, PyTorch's default for matmuls since
// 1.12) and float64 at 19.5 on its FP64 tensor cores (NVIDIA's A100 datasheet).
double flops_in(const Hardware& hw, DType t) {
  if (t == DType::bfloat16) return hw.flops_per_s;
  if (hw.topology == Topology::torus) return t == DType::float32 ? hw.flops_per_s : 0;
  return 19.5e12;
}

const RingOrder kOrders[] = {RingOrder::contiguous, RingOrder::balanced};
const char* const kOrderNames[] = {"contiguous", "balanced"};

// 1. The ring, and the chunks each device holds in either order.
void section_ring(std::ostream& out, const Mesh& mesh, const RingConfig& cfg) {
  const int n = mesh.devices();
  out << "1. Ring " << mesh.text() << ": one causal attention head, S = " << cfg.tokens() << " tokens, head size d = "
      << cfg.head << ",\n   cut into 2n = " << 2 * n << " chunks of " << cfg.chunk
      << " tokens. Each device keeps its queries; "
      << "keys and values\n   go round the ring, n - 1 = " << n - 1 << " shifts by one (collective_permute).\n";
  Table own({"device", "contiguous order", "balanced order"});
  for (int i = 0; i < n; ++i) {
    auto text = [&](RingOrder o) {
      const auto ch = ring_chunks(o, i, n);
      return "chunks " + std::to_string(ch[0]) + ", " + std::to_string(ch[1]);
    };
    own.add({std::to_string(i), text(RingOrder::contiguous), text(RingOrder::balanced)});
  }
  out << own.text() << "\n";
}

// What sections 2 to 7 read: the runs of both orders, in kOrders' order.
struct Lesson {
  const RingConfig& cfg;
  const RingInputs& in;
  const std::vector<RunResult>& runs;
  std::size_t eb;  // element bytes
  DType dtype;
  std::ostream& out;
  Report& report;
  int n() const { return cfg.devices; }
};

// A claim of the lesson, checked and printed.
void claim(const Lesson& L, const std::string& name, bool pass, const std::string& detail) {
  Verdict v;
  v.name = name;
  v.pass = pass;
  v.detail = pass ? "" : detail;
  L.report.checks.push_back(v);
  L.out << "   " << name << ": " << check_text(v) << "\n";
}

// 2. FLOPs per device: counted by the devices as they skip the blocks the mask hides whole.
void section_flops(const Lesson& L) {
  const int n = L.n();
  const double c = double(L.cfg.chunk), d = double(L.cfg.head);
  const double block_fwd = 4.0 * c * c * d, block_bwd = 10.0 * c * c * d;
  L.out << "2. FLOPs per device (a block of " << L.cfg.chunk << " queries x " << L.cfg.chunk << " keys: "
        << num(block_fwd) << " forward, " << num(block_bwd)
        << " backward;\n   blocks of keys wholly after the queries are skipped):\n";
  Table fl({"device", "contiguous fwd", "contiguous bwd", "balanced fwd", "balanced bwd"});
  double spread[2] = {0, 0};
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> row = {std::to_string(i)};
    for (int o = 0; o < 2; ++o)
      for (int w = 0; w < 2; ++w) row.push_back(num(L.runs[o].outputs[i].at("flops")(w)));
    fl.add(row);
  }
  for (int o = 0; o < 2; ++o) {
    double lo = kInf, hi = 0;
    for (int i = 0; i < n; ++i) {
      lo = std::min(lo, L.runs[o].outputs[i].at("flops")(0));
      hi = std::max(hi, L.runs[o].outputs[i].at("flops")(0));
    }
    spread[o] = hi - lo;
    L.report.numbers[std::string(kOrderNames[o]) + "_flops_spread"] = spread[o];
  }
  L.out << fl.text();
  L.out << "   contiguous: device i has 4i + 3 unmasked blocks (the last device " << 4 * n - 1
        << ", the first 3);\n   balanced: every device has (i + 1) + (2n - i) = 2n + 1 = " << 2 * n + 1 << ".\n";
  claim(L, "balanced order: forward FLOPs equal on every device within one block", spread[1] <= block_fwd,
        "spread " + num(spread[1]) + " against one block's " + num(block_fwd));
  claim(L, "contiguous order: the last device does " + std::to_string(4 * n - 1) + "/3 of the first's work",
        spread[0] == (4.0 * n - 4) * block_fwd, "spread " + num(spread[0]));
  L.out << "\n";
}

// 3. Bytes per device: the ledger's rows of the balanced run against the formula.
void section_bytes(const Lesson& L) {
  const int n = L.n();
  const std::size_t blk = L.cfg.block_elements() * L.eb;  // one device's [2c, d] block on the wire
  const std::size_t fwd_formula = ring_forward_bytes(L.cfg, L.eb), bwd_formula = ring_backward_bytes(L.cfg, L.eb);
  std::vector<std::size_t> fwd_sent(n, 0), bwd_sent(n, 0);
  for (const auto& row : L.runs[1].ledger) {
    const bool forward = row.call < 2 * (n - 1);
    (forward ? fwd_sent : bwd_sent)[row.device] += row.bytes_sent;
  }
  L.out << "3. Bytes per device (ledger; one block [" << 2 * L.cfg.chunk << ", " << L.cfg.head << "] = " << blk
        << " B):\n";
  Table by({"device", "forward", "formula 2(n-1) B", "backward", "formula (4(n-1)+2) B"});
  bool bytes_ok = true;
  for (int i = 0; i < n; ++i) {
    by.add({std::to_string(i), std::to_string(fwd_sent[i]), std::to_string(fwd_formula), std::to_string(bwd_sent[i]),
            std::to_string(bwd_formula)});
    bytes_ok = bytes_ok && fwd_sent[i] == fwd_formula && bwd_sent[i] == bwd_formula;
  }
  L.out << by.text();
  L.out << "   forward: K and V, n - 1 shifts each; backward: K and V n - 1 times, dK and dV n times\n"
        << "   (the last shift brings each block's gradient home).\n";
  claim(L, "bytes per device equal the formula, forward and backward", bytes_ok,
        "device 0 sent " + std::to_string(fwd_sent[0]) + " + " + std::to_string(bwd_sent[0]));
  L.report.numbers["forward_bytes_per_device"] = double(fwd_sent[0]);
  L.report.numbers["backward_bytes_per_device"] = double(bwd_sent[0]);
  L.report.numbers["forward_bytes_formula"] = double(fwd_formula);
  L.report.numbers["backward_bytes_formula"] = double(bwd_formula);
  L.out << "\n";
}

// 4. Memory per device against plain attention on one device.
void section_memory(const Lesson& L) {
  const int n = L.n();
  const std::size_t S = L.cfg.tokens(), c = L.cfg.chunk, eb = L.eb;
  double peak = 0;
  for (int i = 0; i < n; ++i) peak = std::max(peak, L.runs[1].outputs[i].at("peak_bytes")(0));
  const double plain = double(plain_attention_bytes(L.cfg, eb));
  const double plain_scores = double(S * S * eb), ring_scores = double(c * c * eb);
  L.out << "4. Memory per device (held at the peak, " << eb << " B elements):\n";
  Table mem({"", "scores at once", "peak held"});
  mem.add({"plain attention, 1 device", std::to_string(std::size_t(plain_scores)), std::to_string(std::size_t(plain))});
  mem.add({"ring attention, per device", std::to_string(std::size_t(ring_scores)), std::to_string(std::size_t(peak))});
  L.out << mem.text();
  L.out << "   plain: q k v o dO dq dk dv [S, d], P and dS [S, S], two statistics [S]; ring: the same\n"
        << "   [2c, d] blocks, one incoming, and one [c, c] block of scores at a time. The scores fall\n"
        << "   as 1/(2n)^2; the whole peak at least as 1/n.\n";
  L.report.numbers["peak_bytes_per_device"] = peak;
  L.report.numbers["plain_peak_bytes"] = plain;
  claim(L, "peak memory per device at most 1/" + std::to_string(n) + " of plain attention's", peak * n <= plain,
        num(peak) + " B x " + std::to_string(n) + " > " + num(plain) + " B");
  L.out << "\n";
}

// 5. Beside lesson 12's layout by keys, for the same head: every device holds all S queries and an
// [S, S/n] slab of scores; it all-reduces the row max [S], the row sum [S] and p v [S, d].
void section_by_keys(const Lesson& L) {
  const int n = L.n();
  const std::size_t S = L.cfg.tokens(), d = L.cfg.head, c = L.cfg.chunk;
  const double frac = 2.0 * (n - 1) / n;
  const double keys_bytes = frac * double(2 * S + S * d) * double(L.eb);
  L.out << "5. Beside lesson 12's layout by keys (same head, forward):\n";
  Table cmp({"layout", "collectives", "bytes/device", "scores held"});
  cmp.add({"by keys (lesson 12)", "all_reduce_max m, all_reduce z, all_reduce o", num(keys_bytes),
           "[" + std::to_string(S) + ", " + std::to_string(S / n) + "]"});
  cmp.add({"ring (here)", std::to_string(2 * (n - 1)) + " collective_permute",
           std::to_string(ring_forward_bytes(L.cfg, L.eb)), "[" + std::to_string(c) + ", " + std::to_string(c) + "]"});
  L.out << cmp.text();
  L.out << "   By keys, each softmax row is spread over the devices, so its max and sum are completed\n"
        << "   by all_reduce; every device holds every query and 1/n of the score matrix. The ring\n"
        << "   moves about the same bytes but keeps each softmax row on one device, folding blocks in\n"
        << "   with the online softmax: 1/n of the queries and one small block of scores at a time.\n"
        << "   (Online softmax: a running max m and sum l per query row; a larger max rescales what was\n"
        << "   summed so far by exp(m_old - m_new), so blocks of keys can arrive one at a time.)\n"
        << "   Without a ring, queries and keys both split over the sequence, the planner would\n"
        << "   all_gather K (and V): the same n - 1 blocks per device, but all of them held at once.\n"
        << "   In a program, one ring step is a roll of k and v by one block, which the planner makes\n"
        << "   a collective_permute (the output does not change: softmax ignores the keys' order):\n"
        << "   build/bin/shardlab run harness/cases/attention_ring_step.toml\n\n";
}

// 6. The cost model at a real size: 128k tokens, 8 devices, 32 heads of 128, priced in the run's
// own element type (bytes and FLOP rate both).
void section_cost(const Lesson& L) {
  const double St = 131072, nn = 8, width = 32 * 128, cc = St / (2 * nn);
  L.out << "6. Cost model, one forward ring step at S = 128k tokens on 8 devices, 32 heads of 128, in\n"
        << "   " << dtype_text(L.dtype) << " (K and V blocks of [" << num(St / nn) << ", " << num(width)
        << "];\n   balanced: (2n+1)/n blocks of " << num(cc) << " x " << num(cc) << " per step on average; "
        << "FLOP/s the preset's rate in that type):\n";
  Table cost({"preset", "wiring", "TFLOP/s", "transfer_us", "compute_us", "hidden"});
  int hidden = 0;
  for (Hardware hw : hardware_presets()) {
    if (hw.name == "this-machine") continue;
    hw.element_bytes = static_cast<double>(L.eb);
    hw.flops_per_s = flops_in(hw, L.dtype);
    if (hw.flops_per_s == 0) {
      cost.add({hw.name, topology_text(hw), "-", "-", "-", "no " + dtype_name(L.dtype) + " unit"});
      continue;
    }
    const RingStepCost t = ring_step_cost(St, int(nn), width, hw);
    cost.add({hw.name, topology_text(hw), num(hw.flops_per_s / 1e12), num(t.transfer_s * 1e6), num(t.compute_s * 1e6),
              t.compute_s >= t.transfer_s ? "yes" : "no"});
    hidden += t.compute_s >= t.transfer_s;
    L.report.numbers["ring_step_transfer_us_" + hw.name] = t.transfer_s * 1e6;
    L.report.numbers["ring_step_compute_us_" + hw.name] = t.compute_s * 1e6;
  }
  L.report.numbers["ring_step_presets_hidden"] = hidden;
  L.out << cost.text();
  L.out << "   When a step's compute takes longer than its transfer, an asynchronous permute hides\n"
        << "   the ring entirely. Here collective_permute waits, so the trace (--trace FILE) shows\n"
        << "   each step's transfer and compute one after the other.\n\n";
}

// 7. The verdict: both orders against unsharded attention; and the takeaway.
void section_verdict(const Lesson& L) {
  L.out << "7. Verdict against unsharded causal attention (float64 reference, inputs in " << dtype_name(L.dtype)
        << "):\n";
  for (int o = 0; o < 2; ++o)
    for (const Verdict& v :
         ring_attention_checks(L.runs[o], L.in, L.cfg, kOrders[o], L.dtype, std::string(kOrderNames[o]) + " ")) {
      L.report.checks.push_back(v);
      L.out << "   " << v.name << ": " << check_text(v) << "\n";
    }
  L.out << "   Tolerances per element: 32 (S + d + 4) eps times the sum of |terms| of that element (the\n"
        << "   orders of float64 sums differ); dK and dV add u of the wire's type times each partial\n"
        << "   sum they carried round the ring. In bfloat16 those n roundings of 2^-8 are real error,\n"
        << "   so dK and dV can only be checked loosely (WEAK): frameworks carry them in float32.\n";
  L.out << "\nTakeaway: ring attention splits the sequence, keeps the softmax rows whole on their\n"
           "          devices and passes keys and values instead; the online softmax makes the blocks\n"
           "          add up, and the balanced order gives every device the same causal work.\n"
           "Next:     build/bin/shardlab ring-attention --devices 8 --tokens 131072\n"
           "          one order on a ring of your size, and its ring step priced at 128k tokens.\n"
           "Exercise: build/bin/shardlab exercise --lesson 19\n";
}

}  // namespace

int main(int argc, char** argv) {
  Cli cli("19_context_parallel", "Lesson 19: context parallelism by ring attention, causal, load-balanced", "X=4");
  cli.mesh_follows_processes("X");
  cli.inputs_option();  // --inputs FILE.npz: named input tensors read from it
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    Session session("19_context_parallel", cli.common);
    const Mesh& mesh = session.mesh();
    if (mesh.rank() != 1 || mesh.devices() < 2)
      throw Error(ErrorKind::parse, "lesson 19 needs a ring of at least 2 devices on one axis, like X=4, not " +
                                        mesh.text());
    const std::string X = mesh.names()[0];
    RingConfig cfg;
    cfg.devices = mesh.devices();
    cfg.seed = cli.common.seed;
    check_ring(cfg);  // a ring past what runs in seconds: one sentence, before anything is printed
    RingInputs in = ring_inputs(cfg, session.dtype());
    read_named_inputs(cli.common.inputs, {{"q", &in.q}, {"k", &in.k}, {"v", &in.v}, {"dout", &in.dout}}, session.dtype());
    section_ring(session.out(), mesh, cfg);

    std::vector<RunResult> runs;
    for (RingOrder o : kOrders)
      runs.push_back(session.run([&](Device& dev) { return ring_attention_device(dev, in, cfg, o, X); }));
    if (!session.runtime().is_root()) return session.finish();
    const Lesson L{cfg, in, runs, session.element_bytes(), session.dtype(), session.out(), session.report()};
    section_flops(L);
    section_bytes(L);
    section_memory(L);
    section_by_keys(L);
    section_cost(L);
    section_verdict(L);
    return session.finish();
  });
}
