#include "harness/models/moe_run.hpp"

#include "core/memory.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/text.hpp"
#include "harness/check/verify.hpp"
#include "harness/models/moe_gate_check.hpp"
#include "harness/models/moe_io.hpp"

namespace shardlab {

void check_moe_mesh(const Mesh& mesh, const MoeShape& s) {
  if (mesh.rank() > 2)
    throw Error(ErrorKind::parse, "a mixture of experts here needs a mesh of 1 or 2 axes like X=2,Y=2, not " + mesh.text());
  check_moe_shape(s, mesh.devices(), mesh.axis_size(mesh.names().back()));
  refuse_if_over_memory(moe_run_bytes(s, mesh.devices(), mesh.axis_size(mesh.names().back())), "this mixture of experts",
                        "give fewer experts, a smaller --top-k or --capacity-factor", kMoeLimitBytes);
}

double moe_run_bytes(const MoeShape& s, int devices, int expert_devices) {
  (void)expert_devices;  // E C slots per device whatever the split: E/n experts of n C slots each
  const double C = double(moe_capacity(s, s.tokens / std::size_t(devices)));
  const double slots = double(s.experts) * C;  // [E, C] per device
  return 8.0 * devices * slots * (10.0 * double(s.model) + 2.0 * double(s.hidden));
}

MoeRun run_moe(Session& session, const MoeShape& s, const MoeInputs& in, bool save) {
  const Mesh& mesh = session.mesh();
  check_moe_mesh(mesh, s);
  MoeRun r;
  const std::string ep = mesh.names().back();
  const int G = mesh.devices();
  r.expert_devices = mesh.axis_size(ep);
  r.replicas = G / r.expert_devices;
  r.capacity = moe_capacity(s, s.tokens / static_cast<std::size_t>(G));
  r.all_to_all_bytes = moe_all_to_all_bytes(s, r.capacity, r.expert_devices, session.element_bytes());
  const RunResult run = session.run([&](Device& dev) { return moe_device(dev, in, s); });
  if (!session.runtime().is_root()) return r;
  r.ref = moe_reference(in, s, G, r.replicas, session.dtype());
  if (save) r.saved = moe_saved_arrays(mesh, run, in, s);
  Report& report = session.report();

  const std::size_t E = static_cast<std::size_t>(s.experts), El = E / static_cast<std::size_t>(r.expert_devices);
  r.device_routed.assign(static_cast<std::size_t>(r.expert_devices), 0);
  r.device_kept = r.device_routed;
  for (std::size_t e = 0; e < E; ++e)
    for (int g = 0; g < G; ++g) {
      r.device_routed[e / El] += r.ref.routed(g, e);
      r.device_kept[e / El] += r.ref.kept(g, e);
    }
  for (std::size_t d = 0; d < r.device_routed.size(); ++d) {
    r.assignments += r.device_routed[d];
    r.dropped += r.device_routed[d] - r.device_kept[d];
  }
  for (double v : r.device_routed)
    r.busiest_share = std::max(r.busiest_share, v / (r.assignments / r.expert_devices));

  Spec by_token, replicated = Spec::replicated(2), by_expert = Spec::replicated(3);
  by_token.dims = {mesh.names(), {}};
  by_expert.dims[0] = {ep};
  const std::vector<std::pair<std::string, std::pair<Spec, const Tensor*>>> checked = {
      {"out", {by_token, &r.ref.out}},          {"dx", {by_token, &r.ref.dx}},
      {"dW_router", {replicated, &r.ref.dw_router}}, {"dW_in", {by_expert, &r.ref.dw_in}},
      {"dW_out", {by_expert, &r.ref.dw_out}},   {"kept", {by_token, &r.ref.kept}},
      {"routed", {by_token, &r.ref.routed}}};
  for (const auto& [name, what] : checked)
    report.checks.push_back(verify_output(mesh, what.first, run, name, *what.second));

  Verdict bytes;
  bytes.name = "each AllToAll sends (n-1)/n x E C m elements = " + std::to_string(r.all_to_all_bytes) + " B per device";
  int calls = 0;
  for (const auto& c : report.collectives)
    if (c.op == "all_to_all") {
      ++calls;
      if (c.bytes_per_device != r.all_to_all_bytes)
        bytes.pass = false, bytes.detail = c.tensor + " sent " + std::to_string(c.bytes_per_device) + " B";
    }
  if (calls != 4) bytes.pass = false, bytes.detail = std::to_string(calls) + " AllToAlls, not 4";
  report.checks.push_back(bytes);
  report.checks.push_back(gates_against_plain(in, s, session.dtype()));

  report.numbers["dropped"] = r.dropped;
  report.numbers["assignments"] = r.assignments;
  report.numbers["capacity"] = static_cast<double>(r.capacity);
  report.numbers["all_to_all_bytes_per_device"] = static_cast<double>(r.all_to_all_bytes);
  report.numbers["busiest_device_share"] = r.busiest_share;
  return r;
}

std::string moe_check_lines(const std::vector<Verdict>& checks, const std::string& indent) {
  std::string out;
  for (const auto& v : checks) {
    if (v.power < 0) {
      out += indent + v.name + ": " + v.line() + "\n";
      continue;
    }
    const std::string pad(v.name.size() < 10 ? 10 - v.name.size() : 1, ' ');
    out += indent + v.name + pad + v.line() + "\n";
  }
  return out;
}

}  // namespace shardlab
