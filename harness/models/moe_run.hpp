// The mixture of experts (harness/models/moe.hpp) run on a session's devices and verified: what
// lesson 20 and `shardlab moe` share. The mesh: batch over every axis, experts over the last.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "harness/check/session.hpp"
#include "harness/models/moe.hpp"

namespace shardlab {

struct MoeRun {
  MoeResult ref;  // the unsharded MoE (root only)
  std::size_t capacity = 0, all_to_all_bytes = 0;  // C, and bytes per device of one AllToAll
  int expert_devices = 1, replicas = 1;             // the last axis's size, the others'
  double assignments = 0, dropped = 0;              // over the whole batch
  std::vector<double> device_routed, device_kept;   // per device of the expert axis
  double busiest_share = 0;                          // most routed to one expert device / an even share
  std::vector<std::pair<std::string, Tensor>> saved;  // with `save`: moe_saved_arrays (moe_io.hpp)
};

// Error(parse) for a mesh of more than 2 axes, or shapes check_moe_shape refuses; Error(unsupported)
// past kMoeLimitBytes or the machine's memory by moe_run_bytes.
void check_moe_mesh(const Mesh& mesh, const MoeShape& s);
// Bytes a run holds at once, in float64: on each device about 10 tensors [E, C, m] (the dispatch
// buffer, what each AllToAll sends and receives, the experts' outputs and their gradients) and 2
// [E, C, h] (hidden activations and their gradient). Measured 5.8 GB at E = k = 1024, cf 64 on
// X=2,Y=2 (C = 2048), where this says 7.0 GiB.
double moe_run_bytes(const MoeShape& s, int devices, int expert_devices);
constexpr double kMoeLimitBytes = 1024.0 * 1024 * 1024;  // a lesson-sized run: seconds, not minutes
// Runs moe_device everywhere; on the root checks out, dx, dW_router, dW_in, dW_out, kept and routed
// against moe_reference bit for bit, each AllToAll's bytes against moe_all_to_all_bytes and the
// gates against a plain softmax-top-k (moe_gate_check.hpp), into session.report().checks; puts
// dropped, assignments, capacity, all_to_all_bytes_per_device and busiest_device_share into its
// numbers. `save`: also keep the run's outputs and routing for --save in `saved` (root only).
MoeRun run_moe(Session& session, const MoeShape& s, const MoeInputs& in, bool save = false);
// "  out       PASS (exact, no tolerance)" for each comparison, "  name: PASS (...)" else: each
// check's line() (verify.hpp), which states its power.
std::string moe_check_lines(const std::vector<Verdict>& checks, const std::string& indent);

}  // namespace shardlab
