// The flags every lesson and shardlab command shares, as a run needs them (harness/check/session.hpp
// sets a run up from them; harness/cli/cli.hpp reads them from a command line).
#pragma once
#include <cstdint>
#include <string>

namespace shardlab {

struct CommonOptions {
  std::string mesh;                  // "X=2,Y=4"
  std::string backend = "sim";       // sim | mpi
  std::string collectives = "ring";  // ring (ours) | native (MPICH's, mpi backend only)
  std::uint64_t seed = 0;
  std::string dtype = "float32";     // float32 | float64 | bfloat16 (core/dtype.hpp)
  bool json = false;
  bool quiet = false;
  std::string trace;                 // --trace FILE: write a Chrome Trace JSON timeline of every run
  double collective_timeout = 300;   // --collective-timeout: seconds a device may wait (collectives/watchdog.hpp)
  std::string inject;                // --inject KIND: one bug planted in the sharded run (collectives/fault.hpp)
  std::string replay = "on";         // --replay on|off: bfloat16 runs against their replay (collectives/replay.hpp)
  std::string uneven = "none";       // --uneven chunk|pad|none: dims that do not divide (core/mesh.hpp)
  std::string inputs;                // --inputs: a .npz or folder of NAME.npy (harness/check/npz.hpp)
};

}  // namespace shardlab
