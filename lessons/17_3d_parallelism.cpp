// Lesson 17 - 3D parallelism: data, pipeline and tensor parallelism at once, with ZeRO-1 on the
// data axis (article 004, "DP+PP+TP" and "DP+PP+TP+ZeRO").
//
// Each kind of parallelism needs at least 2 devices along its own mesh axis, so all three need 2 x
// 2 x 2 = 8. On the mesh D=2,P=2,T=2 a device is one data-parallel replica's share (D), of one
// pipeline stage (P), of one tensor shard (T). Every axis moves different things: T the partial
// sums of each layer (an AllReduce per layer, forward and backward, for every micro-batch), P one
// activation forward and one gradient back per micro-batch, D the gradients once per step
// (ReduceScatter, then AllGather of the updated rows: ZeRO-1). How often each axis talks decides
// where it should sit: T talks most, so it stays inside a node on the fastest links. ZeRO-2 would
// shard the gradients too, but then each micro-batch's gradient must be reduce-scattered over D
// as soon as it exists: m ReduceScatters a step instead of one, so 3D stays with ZeRO-1.
//
// Run:    build/bin/17_3d_parallelism [--json] [--trace FILE] [--mesh D=3,P=2,T=3 --uneven chunk|pad]
//         mpiexec -n 8 build/bin/17_3d_parallelism --backend mpi
// Prints: each device's role; bytes per step by axis against formulas, and their modeled time on
//         NVLink and Ethernet; the same split of GPT-3 by formula and the axis to keep inside a
//         node; ZeRO-1 against ZeRO-2 (run) and ZeRO-3 (GPT-3 by formula) on the D axis; article
//         002's nested 4x4 mesh run as one model on 16 sim devices (its bytes per part); the verdict
//         of one Adam step against the unsharded model, for both ZeRO stages, and of the nested model.
// main reads as numbered sections, one function each; the file is long because it is one lesson.
#include <algorithm>
#include <map>
#include <string>

#include <xtensor/xview.hpp>

#include "collectives/predict.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "harness/check/session.hpp"
#include "core/table.hpp"
#include "harness/check/verify.hpp"
#include "harness/cli/cli.hpp"
#include "harness/cost/cost.hpp"
#include "harness/jobs/nested.hpp"
#include "harness/models/case_run.hpp"
#include "harness/models/three_d.hpp"
#include "harness/models/three_d_gpt3.hpp"

using namespace shardlab;

namespace {

// Seconds of launch-alpha-beta for one device's rows, each axis on the link given for it: a row is
// one call (a collective, a send or a receive), which pays the link's launch once. `only` names
// one axis to count, or "" for all.
double modeled_seconds(const std::vector<LedgerRow>& rows, int device, const std::map<std::string, const Hardware*>& link,
                       const std::string& only = "") {
  double s = 0;
  for (const auto& r : rows)
    if (r.device == device && r.bytes_sent + r.bytes_received > 0 && (only.empty() || traffic_axis(r) == only)) {
      const Hardware& hw = *link.at(traffic_axis(r));
      s += hw.launch + static_cast<double>(r.messages) * hw.alpha + static_cast<double>(r.bytes_sent) / hw.bytes_per_s;
    }
  return s;
}

// Messages a device sent over each axis (ledger rows' payload messages).
std::map<std::string, double> messages_by_axis(const std::vector<LedgerRow>& rows, int device) {
  std::map<std::string, double> n;
  for (const auto& r : rows)
    if (r.device == device) n[traffic_axis(r)] += static_cast<double>(r.messages);
  return n;
}


// What one lesson run shares between its sections.
struct Lesson {
  const Mesh& mesh;
  ThreeDConfig c, c2;  // the step with ZeRO-1, and with ZeRO-2
  RunResult run, run2;
  std::size_t eb = 0;
  DType dtype;
  std::ostream& out;
  Report& report;
};

const Hardware& nvlink() { return hardware_preset("nvlink-a100"); }
const Hardware& ethernet() { return hardware_preset("ethernet-100g"); }

// 1. Each device's role: its stage, its tensor shard, the rows it owns for ZeRO-1.
void section_roles(const Mesh& mesh, const ThreeDConfig& c, std::ostream& out) {
  out << "1. Mesh " << mesh.text() << ": " << mesh.devices() << " devices. " << c.pipe << " pipeline stages, each one MLP block\n"
      << "   y = tanh(x W1) W2 with W1 [" << c.width << ", " << c.hidden << "] and W2 [" << c.hidden << ", " << c.width
      << "]; " << c.data << " replicas, each " << c.chunks << " micro-batches of " << c.micro_batch << ".\n";
  Table roles({"device", "D", "P", "T", "holds", "ZeRO-1 owns (Adam's m, v)"});
  auto range = [](std::size_t lo, std::size_t hi, std::size_t stored) {
    return std::to_string(lo) + ":" + std::to_string(hi) + (stored > hi - lo ? "+" + std::to_string(stored - (hi - lo)) : "");
  };
  bool uneven = false;
  for (int id = 0; id < mesh.devices(); ++id) {
    const auto k = mesh.coords(id);
    const ThreeDCut cut = three_d_cut(c, k[0], k[2]);
    const std::string cols = range(cut.h0, cut.h1, cut.hidden);
    // Rows [at, at + count) of a shard whose first `real` rows are not padding (W2's shard under
    // pad holds T's padding after its real hidden rows): what lies past `real` is shown as +k.
    auto rows = [&](const RowSlicing& s, std::size_t real) {
      const std::size_t lo = std::min(s.at[s.me], real), hi = std::min(s.at[s.me] + s.counts[s.me], real);
      return range(lo, hi, s.stored);
    };
    uneven = uneven || !cut.w1_rows.even || !cut.w2_rows.even || c.hidden % static_cast<std::size_t>(c.tensor) != 0;
    roles.add({std::to_string(id), std::to_string(k[0]), std::to_string(k[1]), std::to_string(k[2]),
               "stage " + std::to_string(k[1]) + ": W1[:, " + cols + "], W2[" + cols + ", :]",
               "W1 rows " + rows(cut.w1_rows, c.width) + ", W2 rows " + rows(cut.w2_rows, cut.h1 - cut.h0) + " of those"});
  }
  out << roles.text("   ");
  if (uneven)
    out << "   Hidden " << c.hidden << " over T=" << c.tensor << " or the shards' rows over D=" << c.data
        << " do not divide (--uneven " << uneven_name(c.uneven) << "):\n"
        << (c.uneven == Uneven::pad ? "   every block is stored at the longest, 'a:b+k' marking k rows of zero padding that\n"
                                      "   the collectives carry and that stays 0 (tanh(0) = 0, its gradient is 0).\n"
                                    : "   blocks of ceil(n/parts), the last shorter; the collectives over D move each device's\n"
                                      "   real rows (--uneven pad stores them all equal, padded).\n");
  out << "\n";
}

// 2. Bytes per step by axis, each device against the formula for its place in the mesh, and what
// the last device's share costs on each link. Returns the axis this run would keep inside a node.
std::string section_bytes(const Lesson& L) {
  const ThreeDConfig& c = L.c;
  const std::size_t act = c.micro_batch * c.width * L.eb;
  std::map<std::string, double> most;  // axis -> largest over devices
  Verdict by_axis;
  by_axis.name = "bytes per step, every device and axis, equal the formulas";
  for (int id = 0; id < L.mesh.devices(); ++id) {
    const auto k = L.mesh.coords(id);
    const int p = k[1];
    std::map<std::string, double> got, want;
    for (const auto& r : L.run.ledger)
      if (r.device == id) got[traffic_axis(r)] += static_cast<double>(r.bytes_sent);
    const double chunks = c.chunks;
    // T: an AllReduce of each micro-batch's output, and (not on the first stage) of its input
    // gradient. Evenly 2(T-1)/T of it each; the ring's chunks of [b, width] differ by one element
    // when T does not divide it.
    want["T"] = chunks * (p > 0 ? 2 : 1) * predicted_bytes_sent_by("all_reduce", c.tensor, act, L.eb, k[2]);
    // P: an activation forward (all but the last stage), a gradient back (all but the first).
    want["P"] = chunks * ((p < c.pipe - 1 ? 1 : 0) + (p > 0 ? 1 : 0)) * act;
    // D: ReduceScatter and AllGather of the device's shards of W1 and W2 (evenly, 2 (D-1)/D of
    // 2 width hidden/T elements).
    want["D"] = zero_d_bytes(c, L.eb, k[0], k[2]);
    for (const char* axis : {"T", "P", "D"}) {
      by_axis.pass = by_axis.pass && got[axis] == want[axis];
      most[axis] = std::max(most[axis], got[axis]);
    }
  }
  L.report.checks.push_back(by_axis);
  const int last = L.mesh.devices() - 1;
  std::map<std::string, std::size_t> calls;
  for (const auto& r : L.run.ledger)
    if (r.device == last) calls[traffic_axis(r)] += 1;
  const std::map<std::string, const Hardware*> fast = {{"T", &nvlink()}, {"P", &nvlink()}, {"D", &nvlink()}},
                                               slow = {{"T", &ethernet()}, {"P", &ethernet()}, {"D", &ethernet()}};
  Table axes({"axis", "parallelism", "moves", "calls", "bytes (most)", "NVLink us", "Ethernet us"});
  const char* what[][3] = {{"T", "tensor", "partial sums, both ways"},
                           {"P", "pipeline", "an activation or gradient"},
                           {"D", "data + ZeRO-1", "gradients, then weights"}};
  std::string keep;
  double gain = 0;
  for (const auto& w : what) {
    const double f = modeled_seconds(L.run.ledger, last, fast, w[0]), s = modeled_seconds(L.run.ledger, last, slow, w[0]);
    axes.add({w[0], w[1], w[2], std::to_string(calls[w[0]]), format_number(most[w[0]], "%.0f"),
              format_number(f * 1e6, "%.1f"), format_number(s * 1e6, "%.1f")});
    if (s - f > gain) gain = s - f, keep = w[0];
  }
  L.out << "2. One training step; what each axis moved (ledger, " << dtype_text(L.dtype)
        << ";\n   calls on the last device, bytes sent by the busiest device), and what the last device's\n"
        << "   calls cost on each link (a launch per call + alpha-beta, no overlap):\n" << axes.text("   ")
        << "   Each matches its formula on every device (see the verdict).\n\n";
  for (const auto& [axis, b] : most) L.report.numbers["bytes_" + axis] = b;
  return keep;
}

std::string gb(double bytes) { return format_number(bytes / 1e9, bytes >= 1e11 ? "%.0f" : "%.1f"); }

// 3. The same split of GPT-3 by formula (three_d_gpt3.hpp): what each axis moves and costs, and the
// axis the model says to keep on the fast links; `run_keep` is this run's (section 2).
void section_gpt3(const Lesson& L, const std::string& run_keep) {
  const ThreeDConfig& c = L.c;
  const std::vector<Gpt3Axis> axes = gpt3_axes(c.data, c.pipe, c.tensor);
  const std::string split = std::to_string(c.data) + "x" + std::to_string(c.pipe) + "x" + std::to_string(c.tensor);
  Table t({"axis", "size", "moves", "calls", "GB", "NVLink (s)", "Ethernet (s)"});
  for (const auto& a : axes) {
    t.add({a.name, std::to_string(a.size), a.calls > 0 ? a.moves : "nothing (one device)", format_number(a.calls, "%.0f"),
           gb(a.bytes), format_number(gpt3_axis_seconds(a, nvlink()), "%.1f"),
           format_number(gpt3_axis_seconds(a, ethernet()), "%.1f")});
    L.report.numbers["gpt3_bytes_" + a.name] = a.bytes;
  }
  // The two placements the rule compares: T on NVLink and the rest on Ethernet, or the reverse.
  auto total = [&](const Hardware& t_link, const Hardware& rest) {
    return gpt3_axis_seconds(axes[0], t_link) + gpt3_axis_seconds(axes[1], rest) + gpt3_axis_seconds(axes[2], rest);
  };
  L.report.numbers["modeled_s_gpt3_tp_inside"] = total(nvlink(), ethernet());
  L.report.numbers["modeled_s_gpt3_tp_across"] = total(ethernet(), nvlink());
  L.out << "3. The same " << split << " split of GPT-3 by formula (96 layers, h = 12288, 32 micro-batches of\n"
        << "   8 x 2048 tokens, bfloat16; communication only, memory not modeled): what a device sends\n"
        << "   over each axis in one step, and its time on each link:\n" << t.text("   ");
  const std::string keep = gpt3_keep_inside(axes, nvlink(), ethernet());
  L.report.strings["gpt3_keep_inside"] = keep;
  L.report.strings["run_keep_inside"] = run_keep;
  if (keep.empty()) {
    L.out << "   Every axis has one device: nothing moves, and there is nothing to place.\n\n";
    return;
  }
  const Gpt3Axis& k = *std::find_if(axes.begin(), axes.end(), [&](const Gpt3Axis& a) { return a.name == keep; });
  const double fast = gpt3_axis_seconds(k, nvlink()), slow = gpt3_axis_seconds(k, ethernet());
  L.out << "   Keep inside a node the axis that loses most on Ethernet: " << keep << " (" << format_number(fast, "%.1f")
        << " s on NVLink, " << format_number(slow, "%.1f") << " s on\n   Ethernet). ";
  if (keep == "T")
    L.out << "T talks in every layer of every micro-batch, so the rule 'TP inside a node'\n   holds here.\n";
  else if (c.tensor == 1)
    L.out << "With T = 1 there is no tensor parallelism to place: the rule 'TP inside a\n   node' has nothing to say, and "
          << keep << " takes the fast links.\n";
  else
    L.out << "On this split " << keep << " loses more than T (" << format_number(gpt3_axis_seconds(axes[0], ethernet()), "%.1f")
          << " s on Ethernet):\n   the rule 'TP inside a node' does not hold here.\n";
  if (run_keep == keep)
    L.out << "   This run agrees on its own tiny scale: its last device also loses most over " << keep << ".\n\n";
  else
    L.out << "   This run's tiny model ranks the axes otherwise: its last device loses most over "
          << (run_keep.empty() ? "none" : run_keep) << ", whose\n   messages of a few bytes cost their latency (launch and alpha), "
          << "not their size. Bytes decide\n   only once the model is large, as at GPT-3's size.\n\n";
}

// 4. ZeRO-1 against ZeRO-2 on D (this run's ledger, every device against the formula) and, at
// GPT-3's size, ZeRO-3 as well, with article 004's three reasons 3D stays with ZeRO-1.
void section_zero(const Lesson& L) {
  const ThreeDConfig &c = L.c, &c2 = L.c2;
  Verdict zero_bytes;
  zero_bytes.name = "bytes over D, ZeRO-1 and ZeRO-2, every device = the ring formulas";
  std::map<int, double> d_bytes, rs_calls, held;  // stage -> the last device's
  for (const auto& [cfg, r] : {std::pair<const ThreeDConfig*, const RunResult*>{&c, &L.run}, {&c2, &L.run2}})
    for (int id = 0; id < L.mesh.devices(); ++id) {
      double got = 0, calls = 0;
      for (const auto& row : r->ledger)
        if (row.device == id && traffic_axis(row) == "D") {
          got += static_cast<double>(row.bytes_sent);
          calls += row.op == "reduce_scatter" ? 1 : 0;
        }
      const auto k = L.mesh.coords(id);
      zero_bytes.pass = zero_bytes.pass && got == zero_d_bytes(*cfg, L.eb, k[0], k[2]) && calls == 2.0 * zero_reduce_scatters(*cfg);
      d_bytes[cfg->zero_stage] = got;
      rs_calls[cfg->zero_stage] = calls;
      held[cfg->zero_stage] = r->outputs[id].at("grad_held")(0);
    }
  L.report.checks.push_back(zero_bytes);
  L.report.numbers["zero1_d_bytes"] = d_bytes[1];
  L.report.numbers["zero2_d_bytes"] = d_bytes[2];
  const Gpt3Zero z = gpt3_zero(c.data, c.pipe, c.tensor);
  auto d_time = [&](int s) {
    Gpt3Axis a{"D", c.data, "", z.d_calls[s], c.data - 1.0, z.d_bytes[s]};
    return gpt3_axis_seconds(a, ethernet());
  };
  const auto last = L.mesh.coords(L.mesh.devices() - 1);
  Table zero({"D axis", "RS / step", "bytes (ledger)", "formula", "grads held", "GPT-3: D GB", "Ethernet (s)"});
  for (int s : {1, 2, 3}) {
    const bool ran = s < 3;
    const ThreeDConfig& cz = s == 1 ? c : c2;
    zero.add({"ZeRO-" + std::to_string(s), ran ? format_number(rs_calls[s], "%.0f") : "-",
              ran ? format_number(d_bytes[s], "%.0f") : "-",
              ran ? format_number(zero_d_bytes(cz, L.eb, last[0], last[2]), "%.0f") : "-",
              ran ? format_number(held[s], "%.0f") : "-", gb(z.d_bytes[s]), format_number(d_time(s), "%.1f")});
    L.report.numbers["modeled_s_gpt3_zero" + std::to_string(s) + "_d"] = d_time(s);
    L.report.numbers["gpt3_zero" + std::to_string(s) + "_d_bytes"] = z.d_bytes[s];
  }
  const std::size_t Tn = static_cast<std::size_t>(c.tensor), Dn = static_cast<std::size_t>(c.data);
  const bool even_d = c.hidden % Tn == 0 && (c.hidden / Tn) % Dn == 0 && c.width % Dn == 0;  // equal parts
  L.out << "4. Why ZeRO-1 here: ZeRO-2 would shard the gradients too, keeping " << (even_d ? "" : "about ") << "1/"
        << c.data << " of them"
        << (c.data == 1 ? " (with D = 1 nothing\n   is sharded or moved: the table shows 0 bytes)" : "") << ". But the\n"
        << "   pipeline's backward makes each weight's gradient once per micro-batch, and a device that keeps\n"
        << "   only its own rows cannot sum the rest over micro-batches: each micro-batch's gradient must be\n"
        << "   reduce-scattered over D at once. The same step run both ways (the last device; RS counts\n"
        << "   W1's and W2's ReduceScatters, grads held the gradient elements it keeps; GPT-3 as in 3,\n"
        << "   D across nodes; ZeRO-3 by formula only):\n"
        << zero.text("   ") << "   ZeRO-2 moves (m+1)/2 times ZeRO-1's bytes over D: " << format_number((c.chunks + 1) / 2.0, "%.1f")
        << " with this run's m = " << c.chunks << ", 16.5 with the\n   article's 32 micro-batches - and a pipeline wants many "
        << "micro-batches for its bubble.\n";
  if (!even_d && d_bytes[1] > 0)
    L.out << "   (These parts are uneven, so the last device's ratio is its own: "
          << format_number(d_bytes[2] / d_bytes[1], "%.2f") << ".)\n";
  // Article 004's other two reasons, at GPT-3's size on this split.
  const double saved_here = z.grads_here_gb * (c.data - 1) / c.data, saved_dp = z.grads_whole_gb * (c.data - 1) / c.data;
  L.out << "   Two more reasons, at GPT-3's size on this split:\n";
  if (c.pipe * c.tensor > 1)
    L.out << "   - PP (and TP) already cut the gradients: a device holds 1/(P T) = 1/" << c.pipe * c.tensor << " of GPT-3's "
          << format_number(z.grads_whole_gb, "%.0f") << " GB\n     of bfloat16 gradients, " << format_number(z.grads_here_gb, "%.1f")
          << " GB. ZeRO-2 would save " << format_number(saved_here, "%.1f") << " GB of them here,\n     against "
          << format_number(saved_dp, "%.0f") << " GB in pure data parallelism over the same " << c.data << " replicas.\n";
  else
    L.out << "   - With P = T = 1 nothing cuts GPT-3's " << format_number(z.grads_whole_gb, "%.0f")
          << " GB of bfloat16 gradients: ZeRO-2 would save\n     " << format_number(saved_here, "%.0f")
          << " GB, as much as in pure data parallelism (the pipeline's 1/P is what shrinks it).\n";
  L.out
        << "   - ZeRO-3 keeps 1/D of the weights as well, so every micro-batch's forward and backward\n"
        << "     gather them over D again: 3m = 96 collectives of the shard a step, 48 times ZeRO-1's\n"
        << "     bytes, all across nodes (the table's last row).\n"
        << "   ZeRO-1 shards what is largest and needed once a step, Adam's states (12 B a weight: "
        << format_number(z.states_here_gb, "%.0f") << " GB\n   here, " << format_number(z.states_here_gb * (c.data - 1) / c.data, "%.0f")
        << " GB of them saved), and keeps the gradients whole.\n\n";
  L.report.numbers["gpt3_grads_here_gb"] = z.grads_here_gb;
  L.report.numbers["gpt3_zero2_saves_gb"] = saved_here;
}

// 5. Article 002's nested 4x4 mesh: each part of the model gives the two axes its own jobs, run as
// one model (harness/jobs/nested.hpp) on 16 sim devices in a runtime of its own, whatever this
// lesson's mesh and backend; its checks join the lesson's.
void section_nested(const Lesson& L) {
  Table nested({"part of the model", "X (4 devices)", "Y (4 devices)"});
  nested.add({"embedding", "data parallelism (batch)", "vocabulary"});
  nested.add({"encoder (MoE layers)", "pipeline stages", "experts"});
  nested.add({"decoder (dense FFN)", "pipeline stages", "batch"});
  nested.add({"softmax", "data parallelism (batch)", "vocabulary"});
  const NestedShape shape;
  const Mesh mesh = Mesh::parse("X=4,Y=4");
  const NestedRun r = run_nested_sim(shape, mesh, L.dtype, 0);
  L.out << "5. Article 002's nested 4x4 mesh (GSPMD's Transformer example): one mesh, each axis reused by\n"
           "   each part of the model for what suits it:\n"
        << nested.text("   ")
        << "   Run as one model on 16 sim devices with that assignment (forward only; the decoder left out):\n"
           "     build/bin/shardlab nested\n"
           "   The embedding ends with batch block x on the devices of row x; that block becomes micro-batch\n"
           "   x and is sent over X to stage 0 (row 0): the switch from data parallelism to pipelining on X\n"
           "   is a communication of its own. Each stage's MoE layer sends its tokens to their experts and\n"
           "   back by AllToAlls over Y, then the micro-batch on to the next stage over X; the last stage\n"
           "   sends micro-batch c back to row c for the softmax over the vocabulary split over Y. Bytes\n"
           "   each part moved (" << shape.batch << " tokens, vocabulary " << shape.vocab << ", width " << shape.model
        << ", " << shape.layers << " MoE layers of " << shape.experts << " experts, top-" << shape.top_k << "):\n"
        << nested_bytes_table(shape, mesh, r.run, element_bytes(L.dtype), L.report.numbers, "   ");
  for (Verdict v : r.checks) {
    v.name = "nested 4x4: " + v.name;
    L.report.checks.push_back(v);
  }
  L.out << "   Its output equals the unsharded model's and each part's bytes their formula (checks in 6).\n"
           "   The decoder (dense layers in stages over X, batch over Y) is this lesson's pipeline with P\n"
           "   for X and D for Y:\n"
           "     build/bin/17_3d_parallelism --mesh D=4,P=4,T=1\n\n";
}

}  // namespace

int main(int argc, char** argv) {
  Cli cli("17_3d_parallelism", "Lesson 17: data, pipeline and tensor parallelism on a D x P x T mesh, with ZeRO-1",
          "D=2,P=2,T=2");
  cli.uneven_option();  // a hidden width (or shard rows) that T (or D) does not divide
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    Session session("17_3d_parallelism", cli.common);
    const Mesh& mesh = session.mesh();
    if (mesh.names() != std::vector<std::string>{"D", "P", "T"})
      throw Error(ErrorKind::parse, "17_3d_parallelism needs the axes D, P and T, e.g. --mesh D=2,P=2,T=2");
    ThreeDConfig c;
    c.data = mesh.axis_size("D");
    c.pipe = mesh.axis_size("P");
    c.tensor = mesh.axis_size("T");
    c.seed = cli.common.seed;
    c.uneven = mesh.uneven();
    const ThreeDInputs in = three_d_inputs(c);
    section_roles(mesh, c, session.out());
    ThreeDConfig c2 = c;  // the same step with ZeRO-2 (section 4)
    c2.zero_stage = 2;
    RunResult run = session.run(three_d_program(c, in));
    RunResult run2 = session.run(three_d_program(c2, in));
    if (!session.runtime().is_root()) return session.finish();
    Lesson L{mesh, c, c2, std::move(run), std::move(run2), session.element_bytes(), session.dtype(), session.out(),
             session.report()};
    const std::string run_keep = section_bytes(L);
    const std::map<std::string, const Hardware*> inside = {{"T", &nvlink()}, {"P", &ethernet()}, {"D", &ethernet()}},
                                                 across = {{"T", &ethernet()}, {"P", &nvlink()}, {"D", &nvlink()}};
    L.report.numbers["modeled_us_tp_inside"] = modeled_seconds(L.run.ledger, mesh.devices() - 1, inside) * 1e6;
    L.report.numbers["modeled_us_tp_across"] = modeled_seconds(L.run.ledger, mesh.devices() - 1, across) * 1e6;
    L.report.numbers["tp_messages"] = messages_by_axis(L.run.ledger, mesh.devices() - 1)["T"];
    L.report.numbers["dp_messages"] = messages_by_axis(L.run.ledger, mesh.devices() - 1)["D"];
    section_gpt3(L, run_keep);
    section_zero(L);
    section_nested(L);

    // 6. One Adam step against the unsharded model, with ZeRO-1 and with ZeRO-2.
    const ThreeDReference ref = three_d_reference(c, in, session.dtype());
    for (const Verdict& v : three_d_check(mesh, c, L.run, ref, "")) L.report.checks.push_back(v);
    L.report.checks.push_back(ref.adam_scalar);  // the shared Adam against a plain one
    for (const Verdict& v : three_d_check(mesh, c2, L.run2, three_d_reference(c2, in, session.dtype()), "ZeRO-2: "))
      L.report.checks.push_back(v);
    const std::string stages_text =
        c.pipe == 2 ? "both stages" : c.pipe == 1 ? "its one stage" : "all " + std::to_string(c.pipe) + " stages";
    L.out << "6. Verdict against the unsharded model (the whole batch, " << stages_text << ", whole weights, one Adam\n"
          << "   step; ZeRO-2 the same step):\n";
    for (const auto& v : L.report.checks) L.out << "   " << v.name << ": " << check_text(v) << "\n";
    L.out << "\nTakeaway: 3D parallelism gives each axis one job: T splits layers (chatty: keep it on NVLink),\n"
             "          P splits the depth (an activation per micro-batch), D splits the batch (once a step).\n"
             "Next:     build/bin/shardlab pipeline --stages 4 --chunks 8 --schedule 1f1b\n"
             "Exercise: build/bin/shardlab exercise --lesson 17\n";
    return session.finish();
  });
}
