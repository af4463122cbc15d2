// `shardlab pipeline --stages P --chunks M --schedule naive|gpipe|1f1b [--layers L] [--json]
// [--trace FILE]`: runs a pipeline of P stages (one device each, sim or MPI), verifies the
// accumulated gradients against the whole batch, and reports the bubble (measured on the logical
// clock, predicted (P-1)/(m+P-1)), the activations each stage stashed and the bytes it sent.
#pragma once
#include "harness/cli/command.hpp"

namespace shardlab {

Command add_pipeline_command(CLI::App& app);

}  // namespace shardlab
