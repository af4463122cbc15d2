// This machine in the cost model: the this-machine preset (harness/cost/cost.cpp) was measured once, on
// one machine; machines of the same kind differ by up to 3x. `shardlab sweep --what machine` writes
// machine.dat with this machine's figures; `--machine FILE` on cost, ffn and sweep reads it back so
// that every this-machine figure comes from the machine the user is on.
#pragma once
#include <string>
#include <vector>

#include "harness/cost/cost.hpp"

namespace shardlab {

// When and where a measurement ran: "2026-11-23 03:40 UTC on host vm (2 cores, AMD EPYC)".
std::string machine_identity();

// The this-machine preset with the figures of a machine.dat (the text of `path`): GEMM and
// reduction rates always; launch, alpha and the link rate when the file has them (an MPI run),
// else the stored preset's, and the source says which. A file written before launch_us existed
// reads as launch 0, and its source says so. Error(parse) naming the file when it is not a
// machine.dat or a figure is not a positive number (launch and alpha: not a non-negative one).
Hardware machine_from_dat(const std::string& text, const std::string& path);
// The presets, with this-machine replaced by machine_from_dat(path) when path is not empty.
// Error(io) when the file cannot be read.
std::vector<Hardware> presets_with_machine(const std::string& path);

}  // namespace shardlab
