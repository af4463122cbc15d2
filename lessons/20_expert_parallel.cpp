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

// How the batch and the experts lie on the mesh.
struct Placement {
  std::string ep;             // the experts' axis: the mesh's last
  int n = 1, G = 1, R = 1;    // devices on ep, all devices, copies of each expert
  std::size_t per_device = 0;  // tokens each device routes
  std::size_t C = 0;           // slots per expert and device
  std::size_t E = 0, El = 0;   // experts, and experts per device
};

Placement place(const Mesh& mesh, const MoeShape& s) {
  Placement p;
  p.ep = mesh.names().back();
  p.n = mesh.axis_size(p.ep), p.G = mesh.devices(), p.R = p.G / p.n;
  p.per_device = s.tokens / static_cast<std::size_t>(p.G), p.C = moe_capacity(s, p.per_device);
  p.E = static_cast<std::size_t>(s.experts), p.El = p.E / static_cast<std::size_t>(p.n);
  return p;
}

// 1. The mesh, and 2. the MoE FFN and its capacity.
void section_layer(std::ostream& out, const Mesh& mesh, const MoeShape& s, const Placement& p) {
  out << "1. Mesh " << mesh.text() << ": the batch split over all " << p.G << " devices, the " << p.E
      << " experts over " << p.ep << " (" << p.El << " per device)" << (p.R > 1 ? ",\n   each expert on the " +
      std::to_string(p.R) + " devices of " + mesh.names()[0] + " beside it (data parallel)" : "") << ".\n"
      << mesh.picture() << "\n";
  out << "2. The MoE FFN: " << s.tokens << " tokens of m = " << s.model << ", " << p.E << " experts of hidden "
      << s.hidden << ", top-" << s.top_k << " routing with softmax gates.\n"
      << "   Each device routes its " << p.per_device << " tokens; an expert takes at most C = ceil("
      << num(s.capacity_factor) << " x " << s.top_k << " x " << p.per_device << " / " << p.E << ") = " << p.C
      << " of\n   them, the first C in token order; the others are dropped (they pass without that expert).\n\n";
}

// What sections 3 to 6 read.
struct Lesson {
  const Mesh& mesh;
  const MoeShape& s;
  const Placement& p;
  const MoeInputs& in;
  const MoeRun& r;
  std::size_t eb;  // element bytes
  DType dtype;
  std::ostream& out;
  Report& report;
};

// 3. Load: assignments to each expert over all devices, kept and dropped; per expert device; and
// the drops at other capacity factors.
void section_load(const Lesson& L) {
  const Placement& p = L.p;
  const MoeRun& r = L.r;
  L.out << "3. Load of the routing (assignments summed over the " << p.G << " devices; an expert takes\n   "
        << p.C << " per device, " << p.C * static_cast<std::size_t>(p.G) << " in all):\n";
  Table load({"expert", "on " + p.ep, "routed", "kept", "dropped", "most from a device"});
  for (std::size_t e = 0; e < p.E; ++e) {
    double routed = 0, kept = 0, most = 0;
    for (int g = 0; g < p.G; ++g) {
      routed += r.ref.routed(g, e), kept += r.ref.kept(g, e);
      most = std::max(most, r.ref.routed(g, e));
    }
    load.add({std::to_string(e), std::to_string(e / p.El), num(routed), num(kept), num(routed - kept),
              num(most) + (most > static_cast<double>(p.C) ? " > C" : "")});
  }
  L.out << load.text();
  Table devices({p.ep, "experts", "routed", "kept", "vs an even share"});
  for (int d = 0; d < p.n; ++d) {
    const auto i = static_cast<std::size_t>(d);
    devices.add({std::to_string(d), std::to_string(d * p.El) + "-" + std::to_string((d + 1) * p.El - 1),
                 num(r.device_routed[i]), num(r.device_kept[i]),
                 format_number(r.device_routed[i] / (r.assignments / p.n), "%.2f") + "x"});
  }
  L.out << devices.text();
  L.out << "   " << num(r.dropped) << " of " << num(r.assignments) << " assignments dropped at capacity factor "
        << num(L.s.capacity_factor) << "; the busiest expert device\n   gets " << format_number(r.busiest_share, "%.2f")
        << "x an even share. The same routing at other capacity factors:\n";
  Table factors({"capacity factor", "C", "dropped", "AllToAll bytes/device"});
  for (double f : {1.0, 1.25, 1.5, 2.0}) {
    MoeShape t = L.s;
    t.capacity_factor = f;
    const MoeResult other = moe_reference(L.in, t, p.G, p.R, L.dtype);
    const double d = xt::sum(other.routed)() - xt::sum(other.kept)();
    L.report.numbers["dropped_cf_" + format_number(f, "%g")] = d;
    factors.add({num(f), std::to_string(moe_capacity(t, p.per_device)), num(d),
                 std::to_string(moe_all_to_all_bytes(t, moe_capacity(t, p.per_device), p.n, L.eb))});
  }
  L.out << factors.text() << "   More slots drop fewer tokens and move more bytes, padding included.\n\n";
}

// 4. Bytes: each AllToAll moves (n-1)/n of the [E, C, m] buffer; the AllReduces 2(n-1)/n.
void section_bytes(const Lesson& L) {
  const Placement& p = L.p;
  L.out << "4. Communication, measured by the ledger (four AllToAlls over " << p.ep << ", then the gradients):\n"
        << collectives_table(L.report.collectives);
  L.out << "   AllToAll: (" << p.n << "-1)/" << p.n << " x " << p.E << " x " << p.C << " x " << L.s.model << " x "
        << L.eb << " B = " << L.r.all_to_all_bytes << " B, whatever the routing: the buffer is\n"
        << "   fixed, empty slots travel too. dW_router is all-reduced over every device"
        << (p.R > 1 ? ",\n   dW_in and dW_out over " + L.mesh.names()[0] + " (the experts' data-parallel copies)" : "")
        << ".\n\n";
}

// 5. The same layer at a real size, modeled on each preset (harness/models/moe_cost.hpp).
void section_model(const Lesson& L) {
  const MoeCostShape big;
  L.out << "5. Modeled at a real size: " << big.experts << " experts, top-" << big.top_k << ", on " << big.devices
        << " devices, " << num(big.tokens) << " tokens each, m = " << num(big.model) << ", h = " << num(big.hidden)
        << ",\n   capacity factor " << num(big.capacity_factor) << ", bfloat16; one training step of the layer:\n";
  Table model({"preset", "one AllToAll (ms)", "communication (ms)", "compute (ms)", "comm share"});
  for (const Hardware& hw : hardware_presets()) {
    if (hw.name == "this-machine") continue;
    const MoeCost c = moe_cost(big, hw);
    model.add({hw.name, format_number(c.all_to_all_seconds * 1e3, "%.3f"),
               format_number(c.comm_seconds * 1e3, "%.2f"), format_number(c.compute_seconds * 1e3, "%.2f"),
               format_number(c.comm_seconds / c.total() * 100, "%.0f") + "%"});
    L.report.numbers["modeled_ms_" + hw.name] = c.total() * 1e3;
  }
  const MoeCost c = moe_cost(big, hardware_preset("nvlink-a100"));
  const double leaves = c.buffer_bytes * (big.devices - 1) / big.devices;  // what the AllToAll prices
  L.report.numbers["moe_buffer_mib"] = c.buffer_bytes / (1 << 20);
  L.report.numbers["moe_sent_mib"] = leaves / (1 << 20);
  L.out << model.text() << "   Each AllToAll's buffer is " << num(big.experts) << " x " << num(c.capacity) << " x "
        << num(big.model) << " x 2 B = " << format_number(c.buffer_bytes / (1 << 20), "%.0f")
        << " MiB per device (C = " << num(c.capacity) << "), of which\n   the " << big.devices - 1 << "/"
        << big.devices << " for other devices, " << format_number(leaves / (1 << 20), "%.0f")
        << " MiB, leaves it: the bytes priced;\n"
        << "   communication is 4 of them and the router's AllReduce; compute counts every slot, padding\n"
        << "   included (12 m h FLOPs each). Over Ethernet the AllToAlls take as long as the experts.\n\n";
}

// 6. Verdict: every output against the unsharded MoE, bit for bit (same rounding, same order).
void section_verdict(const Lesson& L) {
  L.out << "6. Verdict against the unsharded MoE (forward, backward of router and experts, routing):\n"
        << moe_check_lines(L.report.checks, "   ")
        << "   Tolerance 0: the reference rounds where the devices do and adds in their order (the\n"
        << "   AllReduces' ring order included), so any wrong element fails (power 0).\n";
  L.out << "\nTakeaway: experts split over devices cost two AllToAlls each way of a fixed [E, C, m] buffer;\n"
           "          the capacity factor trades dropped tokens against bytes and padding, and the\n"
           "          router's imbalance decides how many tokens a given factor drops.\n"
           "Next:     build/bin/20_expert_parallel --capacity-factor 2.0\n"
           "          the same routing with twice the slots: nothing dropped, twice the bytes.\n"
           "Exercise: build/bin/shardlab exercise --lesson 20\n";
}

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
    const Placement p = place(mesh, s);
    section_layer(session.out(), mesh, s, p);

    MoeInputs in = moe_inputs(s, cli.common.seed);
    read_named_inputs(cli.common.inputs, {{"x", &in.x}, {"W_router", &in.w_router}, {"W_in", &in.w_in}, {"W_out", &in.w_out}, {"dy", &in.dout}}, session.dtype());
    const MoeRun r = run_moe(session, s, in);
    if (!session.runtime().is_root()) return session.finish();
    const Lesson L{mesh, s, p, in, r, session.element_bytes(), session.dtype(), session.out(), session.report()};
    section_load(L);
    section_bytes(L);
    section_model(L);
    section_verdict(L);
    return session.finish();
  });
}
