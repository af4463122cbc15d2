// Memory per device as the mesh grows (article 002: sharding cuts what each device holds in
// proportion to the devices). One FFN step under one strategy is run on a sim mesh of 1, 2, 4, ...
// devices, and each device's own count of the bytes it holds is read back: what stays held
// between stages apart from the transient gathered copies a stage needs while it runs.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "harness/models/ffn.hpp"

namespace shardlab {

struct MemoryPoint {
  int devices = 1;
  std::string mesh;            // "X=2,Y=4"
  bool measured = false;       // false: predicted by plan_ffn only (too large to run here)
  std::size_t held = 0;        // most bytes a device keeps between stages
  std::size_t peak = 0;        // held plus the transient buffers of the stage running
  std::size_t planned_held = 0, planned_peak = 0;
  std::size_t unsharded_held = 0, unsharded_peak = 0;  // one device, whole tensors
  std::size_t transient() const { return peak - held; }
};

// For devices 1, 2, 4 ... max_devices (the strategy's mesh: X=1,Y=2, X=2,Y=2 ... for 2-D ones, D=n
// for 1-D); counts whose mesh the dims do not divide are left out. Runs on the sim backend while
// the unsharded step's peak is at most `run_limit` bytes, and plans only above it. Error(fault)
// when a run's measured memory is not its plan's.
std::vector<MemoryPoint> memory_scaling(const FfnConfig& config, int max_devices,
                                        std::size_t run_limit = std::size_t(64) << 20);

// An aligned table: devices, mesh, held, peak, transient, and held / peak times the devices over
// the unsharded step's (1.00 = falls exactly as 1/n).
std::string memory_scaling_table(const std::vector<MemoryPoint>& points, const std::string& indent = "  ");

}  // namespace shardlab
