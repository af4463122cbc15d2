// The shardlab command line: every command on one CLI11 app. `shardlab --help` lists them.
#include "harness/cli/shardlab.hpp"

#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "collectives/runtime.hpp"
#include "core/blas.hpp"
#include "harness/cli/cli.hpp"
#include "harness/cli/cmd_adam.hpp"
#include "harness/cli/cmd_bench.hpp"
#include "harness/cli/cmd_check.hpp"
#include "harness/cli/cmd_cost.hpp"
#include "harness/cli/cmd_exercise.hpp"
#include "harness/cli/cmd_ffn.hpp"
#include "harness/cli/cmd_matmul.hpp"
#include "harness/cli/cmd_run.hpp"
#include "harness/cli/cmd_sweep.hpp"
#include "harness/cli/cmd_pipeline.hpp"
#include "harness/cli/cmd_plan_model.hpp"
#include "harness/cli/cmd_zero.hpp"
#include "harness/cli/cmd_moe.hpp"
#include "harness/cli/cmd_nested.hpp"
#include "harness/cli/cmd_power.hpp"
#include "harness/cli/cmd_soak.hpp"
#include "harness/cli/cmd_ring_attention.hpp"
#include "collectives/exit_signals.hpp"
#include "harness/cli/help_format.hpp"
#include "harness/cli/version.hpp"

namespace shardlab {

int shardlab_main(int argc, char** argv) {
  hold_standard_streams();
  exit_on_signals();
  CLI::App app("shardlab: learn and check tensor-parallel sharding on a simulated or MPI mesh", "shardlab");
  app.formatter(wrapping_formatter());  // before the subcommands: they copy it
  app.require_subcommand(1);
  auto* version = app.add_subcommand("version", "print the version and the BLAS in use");
  Command bench = add_bench_command(app);
  Command cost = add_cost_command(app);
  Command ffn = add_ffn_command(app);
  Command matmul = add_matmul_command(app);
  Command einsum = add_einsum_command(app);
  Command sweep = add_sweep_command(app);
  Command run = add_run_command(app);
  Command check = add_check_command(app);
  Command zero = add_zero_command(app);
  Command pipeline = add_pipeline_command(app);
  Command plan_model = add_plan_model_command(app);
  Command soak = add_soak_command(app);
  Command exercise = add_exercise_command(app);
  Command power = add_power_command(app);
  Command moe = add_moe_command(app);
  Command adam = add_adam_command(app);
  Command nested = add_nested_command(app);
  Command ring_attention = add_ring_attention_command(app);
  // CLI11 would answer a mistyped command with "A subcommand is required"; name it instead.
  if (argc > 1 && std::string(argv[1]) != "-h" && std::string(argv[1]) != "--help") {
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      known = known || sub->get_name() == argv[1];
    }
    if (!known) {
      if (process_is_root())
        std::cerr << "shardlab: " << (argv[1][0] == '-' ? "unknown option " : "unknown command ") << argv[1]
                  << "; give one of the commands " << names << " (see shardlab --help)\n";
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    if (process_is_root()) std::cout << app.help();
    return checked_stdout(0);
  } catch (const CLI::ParseError& e) {
    if (process_is_root()) std::cerr << "shardlab: " << e.what() << " (see shardlab --help)\n";
    return 2;
  }
  if (const int status = refuse_bad_values(app, "shardlab"); status >= 0) return status;
  return guarded([&] {
    if (*bench.app) return bench.run();
    if (*cost.app) return cost.run();
    if (*ffn.app) return ffn.run();
    if (*matmul.app) return matmul.run();
    if (*einsum.app) return einsum.run();
    if (*sweep.app) return sweep.run();
    if (*run.app) return run.run();
    if (*check.app) return check.run();
    if (*zero.app) return zero.run();
    if (*pipeline.app) return pipeline.run();
    if (*plan_model.app) return plan_model.run();
    if (*soak.app) return soak.run();
    if (*exercise.app) return exercise.run();
    if (*power.app) return power.run();
    if (*moe.app) return moe.run();
    if (*adam.app) return adam.run();
    if (*nested.app) return nested.run();
    if (*ring_attention.app) return ring_attention.run();
    if (*version) {
      std::cout << "shardlab " << SHARDLAB_VERSION << "\nBLAS: " << blas_description() << "\n";
    }
    return 0;
  });
}

}  // namespace shardlab
