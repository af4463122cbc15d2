#include "harness/cli/cmd_bench.hpp"

#include <memory>

#include <CLI/CLI.hpp>

#include "harness/bench/bench.hpp"
#include "harness/models/bench_ffn.hpp"
#include "harness/models/bench_memory.hpp"
#include "harness/cli/bench_plan.hpp"
#include "harness/cli/cli.hpp"
#include "harness/models/ffn.hpp"
#include "harness/cli/timeout_option.hpp"

namespace shardlab {

Command add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* bench = app.add_subcommand("bench", "measure communication, nccl-tests style");
  bench->require_subcommand(1);
  auto* c = bench->add_subcommand(
      "collectives",
      "time AllReduce, AllGather, ReduceScatter and AllToAll over a message-size sweep, each beside std::memcpy of "
      "the bytes a device sends; with --backend mpi ours and MPICH's side by side, alternating which runs first "
      "(mpiexec -n 2 build/bin/shardlab bench collectives --backend mpi)");
  add_collective_timeout(c);
  c->add_option("--backend", o->backend, "sim (threads in this process) or mpi (run under mpiexec)")
      ->capture_default_str();
  c->add_option("--mesh", o->mesh, "device mesh (default: X=<ranks> under mpi, X=2 under sim)");
  c->add_option("--axes", o->axes, "mesh axes of the group, e.g. Y or X,Y (default: all)");
  c->add_option("--ops", o->ops, "collectives to time, comma separated")->capture_default_str();
  c->add_option("--min", o->min, "smallest message in bytes (K, M, G suffixes)")->capture_default_str();
  c->add_option("--max", o->max, "largest message in bytes")->capture_default_str();
  c->add_option("--factor", o->factor, "each size is the previous times this")->capture_default_str();
  // The timings of every call are kept: a million calls per size is far past any use, and far below
  // what would exhaust memory.
  within(c->add_option("--iters", o->iters, "timed calls per size and implementation (default 20; 2 when crowded)"), 1,
         1000000);
  within(c->add_option("--warmup", o->warmup, "untimed calls first (default 5; 1 when crowded)"), 0, 1000000);
  c->add_option("--statistic", o->statistic,
                "median or min of each device's timed calls (min: the fastest call, for ranks that outnumber "
                "the cores, where contention only adds time)")
      ->capture_default_str();
  c->add_option("--csv", o->csv, "also write the table here, plot-ready, with # header rows");
  c->add_option("--dtype", o->dtype, "element type moved: float32, float64 or bfloat16")->capture_default_str();
  c->add_option("--trace", o->trace, "also write every timed call's timeline here (Chrome Trace JSON)");
  c->add_option("--machine", o->machine,
                "a machine.dat (shardlab sweep --what machine): also each row's time in its cost model, the "
                "ratio, and the median and worst error from 1M up");
  c->add_flag("--perturb-expected", o->perturb_expected,
              "testing: every expected value off by one; #wrong must count every element of every timed call and "
              "the exit be 1");
  auto mo = std::make_shared<MemoryBenchOptions>();
  auto* m = bench->add_subcommand(
      "memory",
      "time one FFN training step per strategy on the sim backend with freed memory handed back to the kernel "
      "(glibc's defaults) against kept for reuse (what every Runtime does), side by side");
  add_collective_timeout(m);
  m->add_option("--dims", mo->dims, "FFN sizes B=..,S=..,M=..,H=..")->capture_default_str();
  m->add_option("--strategies", mo->strategies, "FFN strategies, comma separated (each on shardlab ffn's default mesh)")
      ->capture_default_str();
  at_least(m->add_option("--iters", mo->iters, "timed steps per strategy and mode")->capture_default_str(), 1);
  m->add_flag("--json", mo->json, "print one JSON object instead of the table");
  auto fo = std::make_shared<FfnBenchOptions>();
  auto* f = bench->add_subcommand(
      "ffn",
      "time one FFN run phase by phase (inputs, sharded run, verification) on the sim backend beside this "
      "machine's one-core GEMM rate for the same element type, and print sharded / floor");
  add_collective_timeout(f);
  f->add_option("--dims", fo->dims, "FFN sizes B=..,S=..,M=..,H=.. or 'article'")->capture_default_str();
  f->add_option("--strategy", fo->strategy, ffn_strategy_names())->capture_default_str();
  f->add_option("--mesh", fo->mesh, "device mesh (default: the strategy's, as shardlab ffn)");
  f->add_option("--dtype", fo->dtype, "float32, float64 or bfloat16")->capture_default_str();
  f->add_option("--verify", fo->verify, "full, sketch or auto (full up to 5e10 unsharded FLOPs)")
      ->capture_default_str();
  f->add_flag("--backward", fo->backward, "also the backward pass");
  at_least(f->add_option("--steps", fo->steps,
                         "also time N warm steps after the first, inputs and buffers resident (0: none)")
               ->capture_default_str(),
           0);
  f->add_flag("--json", fo->json, "print one JSON object instead of the table");
  f->add_option("--trace", fo->trace, "also write the run's timeline here (Chrome Trace JSON)");
  auto po = std::make_shared<PlanBenchOptions>();
  auto* pl = bench->add_subcommand(
      "plan", "time the planner's search on random contractions over 4-axis meshes (wall and CPU ms: median, p95, slowest)");
  pl->add_option("--meshes", po->meshes, "meshes separated by ';'")->capture_default_str();
  pl->add_option("--cases", po->cases, "random contractions per mesh")->capture_default_str();
  pl->add_option("--seed", po->seed, "seed of the random cases")->capture_default_str();
  pl->add_flag("--json", po->json, "print one JSON object instead of the table");
  return {bench, [o, mo, m, fo, f, po, pl] {
            if (*pl) return bench_plan(*po);
            if (*f) return bench_ffn(*fo);
            return *m ? bench_memory(*mo) : bench_collectives(*o);
          }};
}

}  // namespace shardlab
