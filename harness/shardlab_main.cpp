// build/bin/shardlab: the harness command line. `shardlab --help` lists the commands.
#include <iostream>

#include <CLI/CLI.hpp>

#include "collectives/runtime.hpp"
#include "core/blas.hpp"
#include "harness/cli.hpp"
#include "harness/cmd_bench.hpp"
#include "harness/cmd_ffn.hpp"
#include "harness/cmd_matmul.hpp"
#include "harness/cmd_sweep.hpp"
#include "harness/version.hpp"

int main(int argc, char** argv) {
  using namespace shardlab;
  CLI::App app("shardlab: learn and check tensor-parallel sharding on a simulated or MPI mesh", "shardlab");
  app.require_subcommand(1);
  auto* version = app.add_subcommand("version", "print the version and the BLAS in use");
  Command bench = add_bench_command(app);
  Command ffn = add_ffn_command(app);
  Command matmul = add_matmul_command(app);
  Command einsum = add_einsum_command(app);
  Command sweep = add_sweep_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    if (process_is_root()) std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    if (process_is_root()) std::cerr << "shardlab: " << e.what() << " (see shardlab --help)\n";
    return 2;
  }
  return guarded([&] {
    if (*bench.app) return bench.run();
    if (*ffn.app) return ffn.run();
    if (*matmul.app) return matmul.run();
    if (*einsum.app) return einsum.run();
    if (*sweep.app) return sweep.run();
    if (*version) {
      std::cout << "shardlab " << SHARDLAB_VERSION << "\nBLAS: " << blas_description() << "\n";
    }
    return 0;
  });
}
