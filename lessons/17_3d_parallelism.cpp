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
// Prints: each device's role; bytes per step by axis against formulas; the modeled time of those
//         bytes with T inside a node or across nodes; ZeRO-1 against ZeRO-2 on the D axis (run and
//         at GPT-3's size); article 002's nested 4x4 mesh and the commands that run its parts; the verdict of one Adam step
//         against the unsharded model, for both ZeRO stages.
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
#include "harness/models/case_run.hpp"
#include "harness/models/three_d.hpp"

using namespace shardlab;

namespace {

// Seconds of launch-alpha-beta for one device's rows, each axis on the link given for it: a row is
// one call (a collective, a send or a receive), which pays the link's launch once.
double modeled_seconds(const std::vector<LedgerRow>& rows, int device, const std::map<std::string, const Hardware*>& link) {
  double s = 0;
  for (const auto& r : rows)
    if (r.device == device && r.bytes_sent + r.bytes_received > 0) {
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
    auto& out = session.out();
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

    const RunResult run = session.run(three_d_program(c, in));
    ThreeDConfig c2 = c;  // the same step with ZeRO-2 (section 4)
    c2.zero_stage = 2;
    const RunResult run2 = session.run(three_d_program(c2, in));
    if (!session.runtime().is_root()) return session.finish();
    const std::string split = std::to_string(c.data) + "x" + std::to_string(c.pipe) + "x" + std::to_string(c.tensor);
    Report& report = session.report();
    const std::size_t eb = session.element_bytes(), act = c.micro_batch * c.width * eb;

    // Bytes per step by axis, each device against the formula for its place in the mesh.
    std::map<std::string, double> most;  // axis -> largest over devices
    Verdict by_axis;
    by_axis.name = "bytes per step, every device and axis, equal the formulas";
    for (int id = 0; id < mesh.devices(); ++id) {
      const auto k = mesh.coords(id);
      const int p = k[1];
      std::map<std::string, double> got, want;
      for (const auto& r : run.ledger)
        if (r.device == id) got[traffic_axis(r)] += static_cast<double>(r.bytes_sent);
      const double chunks = c.chunks;
      // T: an AllReduce of each micro-batch's output, and (not on the first stage) of its input gradient.
      // Evenly 2(T-1)/T of it each; the ring's chunks of [b, width] differ by one element when T
      // does not divide it.
      want["T"] = chunks * (p > 0 ? 2 : 1) * predicted_bytes_sent_by("all_reduce", c.tensor, act, eb, k[2]);
      // P: an activation forward (all but the last stage), a gradient back (all but the first).
      want["P"] = chunks * ((p < c.pipe - 1 ? 1 : 0) + (p > 0 ? 1 : 0)) * act;
      // D: ReduceScatter and AllGather of the device's shards of W1 and W2 (evenly, 2 (D-1)/D of
      // 2 width hidden/T elements).
      want["D"] = zero_d_bytes(c, eb, k[0], k[2]);
      for (const char* axis : {"T", "P", "D"}) {
        by_axis.pass = by_axis.pass && got[axis] == want[axis];
        most[axis] = std::max(most[axis], got[axis]);
      }
    }
    report.checks.push_back(by_axis);
    std::map<std::string, std::size_t> calls;
    for (const auto& r : run.ledger)
      if (r.device == mesh.devices() - 1) calls[traffic_axis(r)] += 1;
    Table axes({"axis", "parallelism", "moves", "calls", "bytes (most)"});
    axes.add({"T", "tensor", "each block's partial sums, both ways", std::to_string(calls["T"]), format_number(most["T"], "%.0f")});
    axes.add({"P", "pipeline", "an activation or gradient per chunk", std::to_string(calls["P"]), format_number(most["P"], "%.0f")});
    axes.add({"D", "data + ZeRO-1", "gradient shards, then updated rows", std::to_string(calls["D"]), format_number(most["D"], "%.0f")});
    out << "2. One training step; what each axis moved (ledger, " << dtype_text(session.dtype())
        << ";\n   calls on the last device, bytes sent by the busiest device):\n" << axes.text("   ")
        << "   Each matches its formula on every device (see the verdict).\n\n";
    for (const auto& [axis, b] : most) report.numbers["bytes_" + axis] = b;

    // Modeled time: T inside a node (NVLink) and the rest across nodes (Ethernet), or the reverse.
    const Hardware& nvlink = hardware_preset("nvlink-a100");
    const Hardware& ethernet = hardware_preset("ethernet-100g");
    const double inside = modeled_seconds(run.ledger, mesh.devices() - 1, {{"T", &nvlink}, {"P", &ethernet}, {"D", &ethernet}});
    const double across = modeled_seconds(run.ledger, mesh.devices() - 1, {{"T", &ethernet}, {"P", &nvlink}, {"D", &nvlink}});
    report.numbers["modeled_us_tp_inside"] = inside * 1e6;
    report.numbers["modeled_us_tp_across"] = across * 1e6;
    // The same split at GPT-3's size, by formula: 96 layers (48 per stage), h = 12288, micro-batches
    // of 8 x 2048 tokens, 32 chunks (the article's 8 x 32 x 4), 2-byte elements. Megatron's layer
    // has 2 AllReduces forward and 2 backward over T; its 12 h^2 weights are split over T and
    // their gradients reduce-scattered and gathered over D once a step.
    const double tokens = 8 * 2048, h = 12288, chunks_big = 32, layers = 96.0 / c.pipe, e2 = 2, T = c.tensor, D = c.data;
    const double act_big = tokens * h * e2;
    const double tp_calls = chunks_big * layers * 4, tp_big = tp_calls * 2 * (T - 1) / T * act_big;
    // A first or last stage sends one way; a middle stage (P > 2) both ways.
    const double pp_calls = chunks_big * (c.pipe > 2 ? 2 : 1), pp_big = pp_calls * act_big;
    const double dp_calls = 2 * 2 * layers, dp_big = 2 * (D - 1) / D * 12 * h * h * layers / T * e2;
    auto big = [&](const Hardware& t, const Hardware& rest) {
      return tp_calls * (t.launch + 2 * (T - 1) * t.alpha) + tp_big / t.bytes_per_s +
             pp_calls * (rest.launch + rest.alpha) + pp_big / rest.bytes_per_s +
             dp_calls * (rest.launch + (D - 1) * rest.alpha) + dp_big / rest.bytes_per_s;
    };
    Table model({"placement", "this run (us)", "GPT-3 size (s)"});
    model.add({"T inside a node (NVLink), P and D across (Ethernet)", format_number(inside * 1e6, "%.1f"),
               format_number(big(nvlink, ethernet), "%.1f")});
    model.add({"T across nodes (Ethernet), P and D inside (NVLink)", format_number(across * 1e6, "%.1f"),
               format_number(big(ethernet, nvlink), "%.1f")});
    report.numbers["modeled_s_gpt3_tp_inside"] = big(nvlink, ethernet);
    report.numbers["modeled_s_gpt3_tp_across"] = big(ethernet, nvlink);
    report.numbers["tp_messages"] = messages_by_axis(run.ledger, mesh.devices() - 1)["T"];
    report.numbers["dp_messages"] = messages_by_axis(run.ledger, mesh.devices() - 1)["D"];
    const double gpt_inside = big(nvlink, ethernet), gpt_across = big(ethernet, nvlink);
    out << "3. Modeled communication time of a step (a launch per call + alpha-beta, no overlap) for two\n"
        << "   placements: this run's ledger (the last device), and the same " << split << " split of GPT-3 (96\n"
        << "   layers, h = 12288, 32 micro-batches of 8 x 2048 tokens; communication only, memory not\n"
        << "   modeled), where a step moves T " << format_number(tp_big / 1e12, "%.2f") << " TB, P " << format_number(pp_big / 1e9, "%.1f")
        << " GB and D " << format_number(dp_big / 1e9, "%.0f") << " GB per device:\n"
        << model.text("   ");
    if (gpt_inside < gpt_across)
      out << "   At GPT-3's size T talks in every layer of every micro-batch: on the slow link it costs "
          << format_number(gpt_across / gpt_inside, "%.0f") << "\n   times as much, so TP stays inside a node and D, "
          << "which talks once a step, crosses nodes.\n";
    else
      out << "   On this mesh even GPT-3's T traffic costs less across nodes (" << format_number(gpt_across, "%.1f")
          << " s against " << format_number(gpt_inside, "%.1f") << " s):\n   the rule 'TP inside a node' "
          << "does not hold here.\n";
    auto msgs = messages_by_axis(run.ledger, mesh.devices() - 1);
    if (inside <= across)
      out << "   This run agrees on its own tiny scale (" << format_number(inside * 1e6, "%.1f") << " against "
          << format_number(across * 1e6, "%.1f") << " us).\n\n";
    else
      out << "   This run's tiny model ranks them the other way (" << format_number(inside * 1e6, "%.1f") << " against "
          << format_number(across * 1e6, "%.1f") << " us): its\n   last device sends " << format_number(msgs["T"], "%.0f")
          << " messages over T and " << format_number(msgs["D"], "%.0f") << " over D (ReduceScatter and AllGather over "
          << c.data << " devices),\n   and messages of a few bytes cost their latency (launch and alpha), not their\n"
          << "   size. Bytes decide only once the model is large, as in the GPT-3 column.\n\n";
    // ZeRO-1 against ZeRO-2 on D: this run's ledger (every device, against the formula), and GPT-3's
    // split by formula with D across nodes.
    Verdict zero_bytes;
    zero_bytes.name = "bytes over D, ZeRO-1 and ZeRO-2, every device = the ring formulas";
    std::map<int, double> d_bytes, rs_calls, held;  // stage -> the last device's
    for (const auto& [cfg, r] : {std::pair<const ThreeDConfig*, const RunResult*>{&c, &run}, {&c2, &run2}})
      for (int id = 0; id < mesh.devices(); ++id) {
        double got = 0, calls = 0;
        for (const auto& row : r->ledger)
          if (row.device == id && traffic_axis(row) == "D") {
            got += static_cast<double>(row.bytes_sent);
            calls += row.op == "reduce_scatter" ? 1 : 0;
          }
        const auto k = mesh.coords(id);
        zero_bytes.pass = zero_bytes.pass && got == zero_d_bytes(*cfg, eb, k[0], k[2]) && calls == 2.0 * zero_reduce_scatters(*cfg);
        d_bytes[cfg->zero_stage] = got;
        rs_calls[cfg->zero_stage] = calls;
        held[cfg->zero_stage] = r->outputs[id].at("grad_held")(0);
      }
    report.checks.push_back(zero_bytes);
    report.numbers["zero1_d_bytes"] = d_bytes[1];
    report.numbers["zero2_d_bytes"] = d_bytes[2];
    const double gpt_rs = chunks_big;  // ZeRO-2: one ReduceScatter per micro-batch
    const double dp_big2 = (gpt_rs + 1) / 2 * dp_big, dp_calls2 = (gpt_rs + 1) * 2 * layers;
    auto d_time = [&](double calls, double bytes) {
      return calls * (ethernet.launch + (D - 1) * ethernet.alpha) + bytes / ethernet.bytes_per_s;
    };
    const auto last = mesh.coords(mesh.devices() - 1);
    Table zero({"D axis", "RS / step", "bytes (ledger)", "formula", "grads held", "GPT-3: D GB", "Ethernet (s)"});
    for (int z : {1, 2}) {
      const ThreeDConfig& cz = z == 1 ? c : c2;
      zero.add({"ZeRO-" + std::to_string(z), format_number(rs_calls[z], "%.0f"), format_number(d_bytes[z], "%.0f"),
                format_number(zero_d_bytes(cz, eb, last[0], last[2]), "%.0f"), format_number(held[z], "%.0f"),
                format_number((z == 1 ? dp_big : dp_big2) / 1e9, "%.0f"),
                format_number(z == 1 ? d_time(dp_calls, dp_big) : d_time(dp_calls2, dp_big2), "%.1f")});
    }
    report.numbers["modeled_s_gpt3_zero1_d"] = d_time(dp_calls, dp_big);
    report.numbers["modeled_s_gpt3_zero2_d"] = d_time(dp_calls2, dp_big2);
    const std::size_t Tn = static_cast<std::size_t>(c.tensor), Dn = static_cast<std::size_t>(c.data);
    const bool even_d = c.hidden % Tn == 0 && (c.hidden / Tn) % Dn == 0 && c.width % Dn == 0;  // equal parts
    out << "4. Why ZeRO-1 here: ZeRO-2 would shard the gradients too, keeping " << (even_d ? "" : "about ") << "1/"
        << c.data << " of them"
        << (c.data == 1 ? " (with D = 1 nothing\n   is sharded or moved: the table shows 0 bytes)" : "") << ". But the\n"
        << "   pipeline's backward makes each weight's gradient once per micro-batch, and a device that keeps\n"
        << "   only its own rows cannot sum the rest over micro-batches: each micro-batch's gradient must be\n"
        << "   reduce-scattered over D at once. The same step run both ways (the last device; RS counts\n"
        << "   W1's and W2's ReduceScatters, grads held the gradient elements it keeps; GPT-3 as in 3):\n"
        << zero.text("   ") << "   ZeRO-2 moves (m+1)/2 times ZeRO-1's bytes over D: " << format_number((c.chunks + 1) / 2.0, "%.1f")
        << " with this run's m = " << c.chunks << ", " << format_number((gpt_rs + 1) / 2, "%.1f")
        << " with the\n   article's 32 micro-batches - and a pipeline wants many micro-batches for its bubble. "
        << "So 3D\n   parallelism keeps the gradients whole and shards the optimizer states (ZeRO-1), the "
        << "largest part.\n";
    if (!even_d && d_bytes[1] > 0)
      out << "   (These parts are uneven, so the last device's ratio is its own: "
          << format_number(d_bytes[2] / d_bytes[1], "%.2f") << ".)\n";
    out << "\n";

    Table nested({"part of the model", "X (4 devices)", "Y (4 devices)"});
    nested.add({"embedding", "data parallelism (batch)", "vocabulary"});
    nested.add({"encoder (MoE layers)", "pipeline stages", "experts"});
    nested.add({"decoder (dense FFN)", "pipeline stages", "batch"});
    nested.add({"softmax", "data parallelism (batch)", "vocabulary"});
    out << "5. Article 002's nested 4x4 mesh (GSPMD's Transformer example): one mesh, each axis reused by\n"
           "   each part of the model for what suits it:\n"
        << nested.text("   ")
        << "   Its parts run on 16 sim devices with that assignment of axes: the embedding and softmax\n"
           "   (batch over X, vocabulary over Y; the softmax over a split vocabulary), an MoE layer\n"
           "   (experts over Y, tokens over both), and the dense layers as 4 pipeline stages whose\n"
           "   batch is split over the other 4 devices (this lesson with P for X and D for Y):\n"
           "     build/bin/shardlab run harness/cases/nested_4x4_embedding_softmax.toml\n"
           "     build/bin/shardlab moe --mesh X=4,Y=4\n"
           "     build/bin/17_3d_parallelism --mesh D=4,P=4,T=1\n\n";

    // One Adam step against the unsharded model, with ZeRO-1 and with ZeRO-2.
    for (const Verdict& v : three_d_check(mesh, c, run, three_d_reference(c, in, session.dtype()), ""))
      report.checks.push_back(v);
    for (const Verdict& v : three_d_check(mesh, c2, run2, three_d_reference(c2, in, session.dtype()), "ZeRO-2: "))
      report.checks.push_back(v);
    const std::string stages_text =
        c.pipe == 2 ? "both stages" : c.pipe == 1 ? "its one stage" : "all " + std::to_string(c.pipe) + " stages";
    out << "6. Verdict against the unsharded model (the whole batch, " << stages_text << ", whole weights, one Adam\n"
        << "   step; ZeRO-2 the same step):\n";
    for (const auto& v : report.checks) out << "   " << v.name << ": " << check_text(v) << "\n";
    out << "\nTakeaway: 3D parallelism gives each axis one job: T splits layers (chatty: keep it on NVLink),\n"
           "          P splits the depth (an activation per micro-batch), D splits the batch (once a step).\n"
           "Next:     build/bin/shardlab pipeline --stages 4 --chunks 8 --schedule 1f1b\n"
           "Exercise: build/bin/shardlab exercise --lesson 17\n";
    return session.finish();
  });
}
