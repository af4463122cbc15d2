// `shardlab zero --params N --devices D [--optimizer adam|sgd] [--json]`: memory per device and
// bytes sent per step for plain data parallelism and ZeRO stages 1-3 (harness/models/zero.hpp).
#pragma once
#include "harness/cli/command.hpp"

namespace shardlab {

Command add_zero_command(CLI::App& app);

}  // namespace shardlab
