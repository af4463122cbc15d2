// `shardlab power [--lesson NN|all]... [CASE.toml]... [--dtype T]... [--kinds K,...] [--list] [--json]`:
// the harness's power to catch a wrong answer, measured. Every lesson (or the ones named) in
// every element type (or the ones named), and every case file named (in its own type), is run
// once clean (it must PASS) and once with each fault of collectives/fault.hpp planted
// (--inject; perturb at the power the clean run's weakest comparison claims, so a check that
// cannot keep its claim escapes). A fault that finds no place in a run (no all_to_all, no
// optimizer) is not applicable; one that is planted must turn the verdict to FAIL, or it escaped.
// Prints the matrix, which check caught each fault (--list: every run), every escape and the
// score; exit 1 below 100% or when a clean run fails, 0 at 100%; exit 2 when a run refuses its
// input or no fault asked for finds a place in any run (the sentence names the kinds that do).
// Under mpiexec, rank 0 alone runs the matrix and prints it.
#pragma once
#include "harness/cli/command.hpp"

namespace shardlab {

Command add_power_command(CLI::App& app);

}  // namespace shardlab
