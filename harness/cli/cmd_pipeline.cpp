#include "harness/cli/cmd_pipeline.hpp"

#include <iostream>
#include <limits>
#include <memory>

#include <CLI/CLI.hpp>

#include "core/error.hpp"
#include "harness/cli/cli.hpp"
#include "harness/check/session.hpp"
#include "harness/models/case_run.hpp"
#include "harness/models/pipeline_run.hpp"

namespace shardlab {

namespace {

struct PipelineOptions {
  CommonOptions common;
  static constexpr int kUnset = std::numeric_limits<int>::min();
  int stages = 4, chunks = kUnset, layers = 8;  // chunks: 4, or 1 for naive, unless given
  int virtual_stages = kUnset;                   // 2 for interleaved, else 1, unless given
  int width = 8, micro_batch = 2, batch = 0;
  std::string schedule = "gpipe";
};

int run(PipelineOptions o) {
  PipelineConfig c;
  c.stages = o.stages;
  c.schedule = parse_schedule(o.schedule);
  c.chunks = o.chunks != PipelineOptions::kUnset ? o.chunks : c.schedule == PipeSchedule::naive ? 1 : 4;
  c.layers = o.layers;
  c.virtual_stages = o.virtual_stages != PipelineOptions::kUnset ? o.virtual_stages
                     : c.schedule == PipeSchedule::interleaved ? 2 : 1;
  if (o.width < 1 || o.micro_batch < 1)
    throw Error(ErrorKind::parse, "--width and --micro-batch must be positive, not " + std::to_string(o.width) + " and " +
                                      std::to_string(o.micro_batch));
  c.width = static_cast<std::size_t>(o.width);
  c.micro_batch = static_cast<std::size_t>(o.micro_batch);
  c.schedule = parse_schedule(o.schedule);
  c.seed = o.common.seed;
  if (o.batch < 0) throw Error(ErrorKind::parse, "--batch must be positive, not " + std::to_string(o.batch));
  c.batch = static_cast<std::size_t>(o.batch);
  c.uneven = parse_uneven(o.common.uneven);
  check_pipeline(c);  // bad numbers: one sentence, before any device starts
  o.common.mesh = "X=" + std::to_string(c.stages);
  Session session("pipeline", o.common);
  auto& out = session.out();
  const std::vector<int> per = stage_layers(c);
  std::string each = std::to_string(per[0]) + " each";
  if (per.front() != per.back()) {  // uneven layers (v = 1): torch.chunk's cut
    each.clear();
    for (int n : per) each += (each.empty() ? "" : ", ") + std::to_string(n);
  }
  // The micro-batches' rows: --micro-batch each, or --batch cut as --uneven says.
  std::string rows = c.batch > 0 ? "" : std::to_string(c.micro_batch);
  const auto real = micro_batch_rows(c);
  for (std::size_t k = 0; c.batch > 0 && k < std::min<std::size_t>(real.size(), 8); ++k)
    rows += (rows.empty() ? "" : ",") + std::to_string(real[k]);
  if (c.batch > 0 && real.size() > 8) rows += ",...";
  rows += " rows";
  if (c.uneven == Uneven::pad && micro_batch_stored(c, c.chunks - 1) != real.back())
    rows += " (each sent as " + std::to_string(micro_batch_stored(c, 0)) + ", zero rows after the real ones)";
  out << "shardlab pipeline: " << c.layers << " layers of [" << c.width << ", " << c.width << "] on " << c.stages
      << " stages (" << (c.virtual_stages > 1 ? std::to_string(c.layers / c.stages) + " each" : each);
  if (c.virtual_stages > 1)
    out << "; " << c.virtual_stages << " model chunks of " << c.layers / (c.stages * c.virtual_stages) << " per device";
  out << "),\n  " << c.chunks << " micro-batch(es) of " << rows
      << ", schedule " << schedule_name(c.schedule) << ", " << session.options().backend << " backend\n\n";
  const PipelineRun r = run_pipeline(session, c);
  if (!session.runtime().is_root()) return session.finish();
  out << pipeline_text(r) << "\nChecks:\n";
  for (const auto& v : session.report().checks) out << "  " << v.name << ": " << check_text(v) << "\n";
  return session.finish();
}

}  // namespace

Command add_pipeline_command(CLI::App& app) {
  auto o = std::make_shared<PipelineOptions>();
  auto* c = app.add_subcommand("pipeline", "run a pipeline of stages (article 004: naive, GPipe, 1F1B or interleaved), "
                                           "verify its gradients and measure its bubble");
  c->add_option("--stages", o->stages, "pipeline stages, one device each")->capture_default_str();
  c->add_option("--chunks", o->chunks, "micro-batches the batch is cut into (default 4; naive: 1)");
  c->add_option("--schedule", o->schedule, "naive, gpipe, 1f1b or interleaved")->capture_default_str();
  c->add_option("--virtual-stages", o->virtual_stages, "interleaved: model chunks per device (default 2)");
  c->add_option("--layers", o->layers, "layers, split evenly over the stages")->capture_default_str();
  c->add_option("--width", o->width, "each layer's width D (weights [D, D])")->capture_default_str();
  auto* micro = c->add_option("--micro-batch", o->micro_batch, "rows of each micro-batch")->capture_default_str();
  // A --batch of 0 would read as "not given", and with --micro-batch one of the two would be dropped.
  auto* batch = c->add_option("--batch", o->batch,
                              "rows of the whole batch, cut into --chunks micro-batches (instead of --micro-batch)");
  at_least(batch, 1);
  batch->excludes(micro);
  add_run_options(c, o->common, "<stages>");
  add_uneven_option(c, o->common.uneven);
  return {c, [o] { return run(*o); }};
}

}  // namespace shardlab
