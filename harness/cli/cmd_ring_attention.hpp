// `shardlab ring-attention [--devices N] [--chunk C] [--head D] [--order balanced|contiguous]
// [--tokens S --width W]`: ring attention (context parallelism, lesson 19) on a ring of N devices,
// forward and backward, verified against unsharded causal attention; FLOPs and bytes per device
// against their formulas; with --tokens, the cost model's ring step at that size on the presets.
// Common flags: --backend, --dtype, --seed, --json, --quiet, --trace, --inject.
#pragma once
#include "harness/cli/command.hpp"

namespace shardlab {

Command add_ring_attention_command(CLI::App& app);

}  // namespace shardlab
