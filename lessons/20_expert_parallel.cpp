// Lesson 20 - expert parallelism: a mixture-of-experts FFN (GShard, Lepikhin et al. 2020; the
// JAX scaling book's MoE section; it builds on lesson 14's data parallelism).
//
// One idea: a mixture of experts gives each token only top_k of E expert FFNs, chosen by a router,
// so its parameters grow with E while each token's work does not. Put E/n experts on each of n
// devices and a token must travel to its experts: every device packs its tokens by expert into a
// fixed buffer [E, C, m] and one AllToAll delivers each expert its tokens; a second AllToAll brings
// the results home, where the gates mix them. The buffer is fixed, so an expert takes at most C
// tokens of a device (C = capacity factor x top_k x tokens / E); the rest are dropped, and the
// router's imbalance decides how many. On a 2D mesh the batch is split over both axes and the
// experts over one, as GShard does: each expert is data-parallel over the other axis, so its
// gradient is all-reduced there, and the router's over every device.
//
// Run:    build/bin/20_expert_parallel [--mesh X=2,Y=2] [--capacity-factor 1.0] [--experts 8]
//                                      [--top-k 2] [--json]
//         mpiexec -n 4 build/bin/20_expert_parallel --backend mpi
// Prints: the mesh; the model and its capacity; tokens per expert and per device (routed, kept,
//         dropped) and drops at other capacity factors; the collectives with bytes per device
//         against the formula; the modeled time of 64 experts, top-2, on 8 devices on the
//         presets; the verdict of the forward and backward against the unsharded MoE.
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/text.hpp"
#include "harness/check/session.hpp"
#include "core/table.hpp"
#include "harness/cli/cli.hpp"
#include "harness/cost/cost.hpp"
#include "harness/models/moe_cost.hpp"
#include "harness/models/moe_run.hpp"
#include "harness/models/case_run_io.hpp"

using namespace shardlab;

namespace {

double parse_factor(const std::string& text) { return parse_real(text, "--capacity-factor"); }

std::string num(double v) { return format_number(v, "%g"); }

}  // namespace

int main(int argc, char** argv) {
  Cli cli("20_expert_parallel", "Lesson 20: a mixture-of-experts FFN, experts split over a mesh axis", "X=2,Y=2");
  std::string factor = "1.0";
  MoeShape s;
  cli.option("--capacity-factor", factor, "slots per expert and device, in units of an even share (1.0)");
  cli.option("--experts", s.experts, "number of experts E (8)");
  cli.option("--top-k", s.top_k, "experts per token (2)");
  cli.inputs_option();  // --inputs FILE.npz: named input tensors read from it
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    s.capacity_factor = parse_factor(factor);
    if (cli.common.collectives == "native")
      throw Error(ErrorKind::parse, "lesson 20's reference adds gradients in the ring's order; run it without "
                                    "--collectives native");
    Session session("20_expert_parallel", cli.common);
    const Mesh& mesh = session.mesh();
    check_moe_mesh(mesh, s);
    const std::string ep = mesh.names().back();
    const int n = mesh.axis_size(ep), G = mesh.devices(), R = G / n;
    const std::size_t per_device = s.tokens / static_cast<std::size_t>(G), C = moe_capacity(s, per_device);
    const std::size_t E = static_cast<std::size_t>(s.experts), El = E / static_cast<std::size_t>(n);
    auto& out = session.out();
    out << "1. Mesh " << mesh.text() << ": the batch split over all " << G << " devices, the " << E
        << " experts over " << ep << " (" << El << " per device)" << (R > 1 ? ",\n   each expert on the " +
        std::to_string(R) + " devices of " + mesh.names()[0] + " beside it (data parallel)" : "") << ".\n"
        << mesh.picture() << "\n";
    out << "2. The MoE FFN: " << s.tokens << " tokens of m = " << s.model << ", " << E << " experts of hidden "
        << s.hidden << ", top-" << s.top_k << " routing with softmax gates.\n"
        << "   Each device routes its " << per_device << " tokens; an expert takes at most C = ceil("
        << num(s.capacity_factor) << " x " << s.top_k << " x " << per_device << " / " << E << ") = " << C
        << " of\n   them, the first C in token order; the others are dropped (they pass without that expert).\n\n";

    MoeInputs in = moe_inputs(s, cli.common.seed);
    read_named_inputs(cli.common.inputs, {{"x", &in.x}, {"W_router", &in.w_router}, {"W_in", &in.w_in}, {"W_out", &in.w_out}, {"dy", &in.dout}}, session.dtype());
    const MoeRun r = run_moe(session, s, in);
    if (!session.runtime().is_root()) return session.finish();
    Report& report = session.report();

    // 3. Load: assignments to each expert over all devices, kept and dropped; per expert device.
    out << "3. Load of the routing (assignments summed over the " << G << " devices; an expert takes\n   "
        << C << " per device, " << C * static_cast<std::size_t>(G) << " in all):\n";
    Table load({"expert", "on " + ep, "routed", "kept", "dropped", "most from a device"});
    for (std::size_t e = 0; e < E; ++e) {
      double routed = 0, kept = 0, most = 0;
      for (int g = 0; g < G; ++g) {
        routed += r.ref.routed(g, e), kept += r.ref.kept(g, e);
        most = std::max(most, r.ref.routed(g, e));
      }
      load.add({std::to_string(e), std::to_string(e / El), num(routed), num(kept), num(routed - kept),
                num(most) + (most > static_cast<double>(C) ? " > C" : "")});
    }
    out << load.text();
    Table devices({ep, "experts", "routed", "kept", "vs an even share"});
    for (int d = 0; d < n; ++d) {
      const auto i = static_cast<std::size_t>(d);
      devices.add({std::to_string(d), std::to_string(d * El) + "-" + std::to_string((d + 1) * El - 1),
                   num(r.device_routed[i]), num(r.device_kept[i]),
                   format_number(r.device_routed[i] / (r.assignments / n), "%.2f") + "x"});
    }
    out << devices.text();
    out << "   " << num(r.dropped) << " of " << num(r.assignments) << " assignments dropped at capacity factor "
        << num(s.capacity_factor) << "; the busiest expert device\n   gets " << format_number(r.busiest_share, "%.2f")
        << "x an even share. The same routing at other capacity factors:\n";
    Table factors({"capacity factor", "C", "dropped", "AllToAll bytes/device"});
    for (double f : {1.0, 1.25, 1.5, 2.0}) {
      MoeShape t = s;
      t.capacity_factor = f;
      const MoeResult other = moe_reference(in, t, G, R, session.dtype());
      const double d = xt::sum(other.routed)() - xt::sum(other.kept)();
      report.numbers["dropped_cf_" + format_number(f, "%g")] = d;
      factors.add({num(f), std::to_string(moe_capacity(t, per_device)), num(d),
                   std::to_string(moe_all_to_all_bytes(t, moe_capacity(t, per_device), n, session.element_bytes()))});
    }
    out << factors.text() << "   More slots drop fewer tokens and move more bytes, padding included.\n\n";

    // 4. Bytes: each AllToAll moves (n-1)/n of the [E, C, m] buffer; the AllReduces 2(n-1)/n.
    out << "4. Communication, measured by the ledger (four AllToAlls over " << ep << ", then the gradients):\n"
        << collectives_table(report.collectives);
    out << "   AllToAll: (" << n << "-1)/" << n << " x " << E << " x " << C << " x " << s.model << " x "
        << session.element_bytes() << " B = " << r.all_to_all_bytes << " B, whatever the routing: the buffer is\n"
        << "   fixed, empty slots travel too. dW_router is all-reduced over every device"
        << (R > 1 ? ",\n   dW_in and dW_out over " + mesh.names()[0] + " (the experts' data-parallel copies)" : "")
        << ".\n\n";

    // 5. The same layer at a real size, modeled on each preset (harness/models/moe_cost.hpp).
    const MoeCostShape big;
    out << "5. Modeled at a real size: " << big.experts << " experts, top-" << big.top_k << ", on " << big.devices
        << " devices, " << num(big.tokens) << " tokens each, m = " << num(big.model) << ", h = " << num(big.hidden)
        << ",\n   capacity factor " << num(big.capacity_factor) << ", bfloat16; one training step of the layer:\n";
    Table model({"preset", "one AllToAll (ms)", "communication (ms)", "compute (ms)", "comm share"});
    for (const Hardware& hw : hardware_presets()) {
      if (hw.name == "this-machine") continue;
      const MoeCost c = moe_cost(big, hw);
      model.add({hw.name, format_number(c.all_to_all_seconds * 1e3, "%.3f"),
                 format_number(c.comm_seconds * 1e3, "%.2f"), format_number(c.compute_seconds * 1e3, "%.2f"),
                 format_number(c.comm_seconds / c.total() * 100, "%.0f") + "%"});
      report.numbers["modeled_ms_" + hw.name] = c.total() * 1e3;
    }
    const MoeCost c = moe_cost(big, hardware_preset("nvlink-a100"));
    const double leaves = c.buffer_bytes * (big.devices - 1) / big.devices;  // what the AllToAll prices
    report.numbers["moe_buffer_mib"] = c.buffer_bytes / (1 << 20);
    report.numbers["moe_sent_mib"] = leaves / (1 << 20);
    out << model.text() << "   Each AllToAll's buffer is " << num(big.experts) << " x " << num(c.capacity) << " x "
        << num(big.model) << " x 2 B = " << format_number(c.buffer_bytes / (1 << 20), "%.0f")
        << " MiB per device (C = " << num(c.capacity) << "), of which\n   the " << big.devices - 1 << "/"
        << big.devices << " for other devices, " << format_number(leaves / (1 << 20), "%.0f")
        << " MiB, leaves it: the bytes priced;\n"
        << "   communication is 4 of them and the router's AllReduce; compute counts every slot, padding\n"
        << "   included (12 m h FLOPs each). Over Ethernet the AllToAlls take as long as the experts.\n\n";

    // 6. Verdict: every output against the unsharded MoE, bit for bit (same rounding, same order).
    out << "6. Verdict against the unsharded MoE (forward, backward of router and experts, routing):\n"
        << moe_check_lines(report.checks, "   ")
        << "   Tolerance 0: the reference rounds where the devices do and adds in their order (the\n"
        << "   AllReduces' ring order included), so any wrong element fails (power 0).\n";
    out << "\nTakeaway: experts split over devices cost two AllToAlls each way of a fixed [E, C, m] buffer;\n"
           "          the capacity factor trades dropped tokens against bytes and padding, and the\n"
           "          router's imbalance decides how many tokens a given factor drops.\n"
           "Next:     build/bin/20_expert_parallel --capacity-factor 2.0\n"
           "          the same routing with twice the slots: nothing dropped, twice the bytes.\n"
           "Exercise: build/bin/shardlab exercise --lesson 20\n";
    return session.finish();
  });
}
