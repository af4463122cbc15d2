#include "harness/models/pipeline_run.hpp"

#include <algorithm>

#include "core/text.hpp"
#include "core/table.hpp"
#include "harness/check/verify.hpp"

namespace shardlab {

PipelineRun run_pipeline(Session& session, const PipelineConfig& config) {
  PipelineRun r;
  r.config = config;
  const PipeInputs in = pipeline_inputs(config);
  const RunResult run = session.run(pipeline_program(config, in));
  if (!session.runtime().is_root()) return r;
  const int p = config.stages, m = config.chunks, v = config.virtual_stages;
  const std::vector<int> per = stage_layers(config);  // layers of each virtual stage
  const bool inter = config.schedule == PipeSchedule::interleaved;
  Report& report = session.report();

  // Gradients: each layer's from the stage that holds it, against the whole batch's.
  const PipeReference ref = pipeline_reference(config, in, session.dtype());
  Verdict grads;
  grads.name = "gradients over " + std::to_string(m) + " chunk(s) = whole batch's";
  for (int l = 0; l < config.layers; ++l) {
    const std::string name = "dW" + std::to_string(l);
    const Verdict one = compare(name, run.outputs[device_of_layer(config, l)].at(name), ref.grads[l], ref.tolerance[l]);
    absorb(grads, one, name);
  }
  grads.name = schedule_name(config.schedule) + ": " + grads.name;
  report.checks.push_back(grads);

  // The order each device ran, its logical clock and its wall clock.
  double busy_wall = 0, t0 = 1e300, t1 = 0;
  r.orders = executed_orders(run, p);
  for (int s = 0; s < p; ++s) {
    const Tensor& wall = run.outputs[s].at("wall");
    for (std::size_t i = 0; i < wall.shape()[0]; ++i) {
      busy_wall += wall(i, 1) - wall(i, 0);
      t0 = std::min(t0, wall(i, 0));
      t1 = std::max(t1, wall(i, 1));
    }
    r.peak_stash.push_back(static_cast<int>(run.outputs[s].at("peak_stash")(0)));
    r.stash_bound.push_back(stash_formula(config.schedule, p, m, s, v));
  }
  r.wall_bubble = t1 > t0 ? 1.0 - busy_wall / (p * (t1 - t0)) : 0.0;
  r.ticks = logical_clock(r.orders);
  r.bubble_measured = bubble_fraction(r.ticks, p);
  r.bubble_predicted = bubble_formula(p, m, v);
  Verdict bubble;
  bubble.name = std::string("bubble on the logical clock = ") + (inter ? "(P-1)/(v m+P-1)" : "(P-1)/(m+P-1)");
  bubble.pass = std::abs(r.bubble_measured - r.bubble_predicted) < 1e-12;
  bubble.name = schedule_name(config.schedule) + ": " + bubble.name;
  report.checks.push_back(bubble);
  Verdict stash;
  stash.name = "stashed micro-batches = the bound";
  for (int s = 0; s < p; ++s) stash.pass = stash.pass && r.peak_stash[s] == r.stash_bound[s];
  stash.name = schedule_name(config.schedule) + ": " + stash.name;
  report.checks.push_back(stash);

  // Bytes: each stage sends every micro-batch's activation forward and gradient back, out of each
  // of its virtual stages (but the model's first and last): messages_formula blocks of [b, D].
  // Micro-batch k moves as micro_batch_stored rows (uneven: torch.chunk's, or ceil(B/m) padded).
  r.block_bytes = micro_batch_stored(config, 0) * config.width * session.element_bytes();  // the largest
  double all_blocks = 0;  // one activation of every micro-batch
  for (int k = 0; k < m; ++k)
    all_blocks += static_cast<double>(micro_batch_stored(config, k) * config.width * session.element_bytes());
  r.sent_bytes.assign(p, 0);
  r.sent_messages.assign(p, 0);
  for (const auto& row : run.ledger) {
    r.sent_bytes[row.device] += static_cast<double>(row.bytes_sent);
    if (row.op == "send") r.sent_messages[row.device] += static_cast<int>(row.messages);
  }
  Verdict bytes;
  bytes.name = inter ? "bytes = an activation and a gradient per chunk and virtual stage"
                     : "bytes = one activation and one gradient per chunk";
  for (int s = 0; s < p; ++s) {
    r.sent_formula.push_back(static_cast<double>(messages_formula(config, s) / m) * all_blocks);
    bytes.pass = bytes.pass && r.sent_bytes[s] == r.sent_formula[s] && r.sent_messages[s] == messages_formula(config, s);
  }
  bytes.name = schedule_name(config.schedule) + ": " + bytes.name;
  report.checks.push_back(bytes);

  double total = 0;
  for (double b : r.sent_bytes) total += b;
  report.strings["schedule"] = schedule_name(config.schedule);
  report.numbers["stages"] = p;
  report.numbers["chunks"] = m;
  report.numbers["layers"] = config.layers;
  report.numbers["virtual_stages"] = v;
  report.numbers["bubble_measured"] = r.bubble_measured;
  report.numbers["bubble_predicted"] = r.bubble_predicted;
  report.numbers["bubble_wall_clock"] = r.wall_bubble;
  report.numbers["p2p_bytes"] = total;
  double messages = 0;
  for (int n : r.sent_messages) messages += n;
  report.numbers["p2p_messages"] = messages;
  // Stashed activations per stage: micro-batches, and bytes (the input of each of its layers and
  // the output, in the element type).
  std::string stashes = "[", act_bytes = "[";
  double total_stash = 0;
  for (int s = 0; s < p; ++s) {
    const double b = static_cast<double>(r.peak_stash[s]) * (per[static_cast<std::size_t>(s)] + 1) *
                     static_cast<double>(r.block_bytes);  // per: of a virtual stage; the largest micro-batch
    r.peak_activation_bytes.push_back(b);
    stashes += (s ? ", " : "") + std::to_string(r.peak_stash[s]);
    act_bytes += (s ? ", " : "") + format_number(b, "%.0f");
    total_stash += r.peak_stash[s];
  }
  report.json["peak_stash"] = stashes + "]";
  report.json["peak_activation_bytes"] = act_bytes + "]";
  report.numbers["peak_stash_total"] = total_stash;
  return r;
}

std::string pipeline_text(const PipelineRun& r) {
  const int p = r.config.stages, m = r.config.chunks, v = r.config.virtual_stages;
  const bool inter = r.config.schedule == PipeSchedule::interleaved;
  std::string out = "Timeline: each device's forwards (F stage,chunk) and backwards (B) in the order it ran them,\n"
                    "one tick each on a logical clock; an op starts when its device is free and its input exists";
  out += inter ? ".\nVirtual stages: device d runs d, d+" + std::to_string(p) + ", ... (" +
                     std::to_string(r.config.layers / (p * v)) + " layer(s) each); a tick is 1/" + std::to_string(v) +
                     " of its layers:\n"
               : std::string(":\n");
  out += timeline_picture(r.ticks, p) + "\n";
  Table t({"stage", "ops run", "stashed at most", "bound", "stash bytes", "messages", "bytes sent", "formula"});
  for (int s = 0; s < p; ++s)
    t.add({std::to_string(s), std::to_string(r.orders[s].size()), std::to_string(r.peak_stash[s]),
           std::to_string(r.stash_bound[s]), format_number(r.peak_activation_bytes[s], "%.0f"),
           std::to_string(r.sent_messages[s]), format_number(r.sent_bytes[s], "%.0f"),
           format_number(r.sent_formula[s], "%.0f")});
  const auto rows = micro_batch_rows(r.config);
  const bool same = std::all_of(rows.begin(), rows.end(), [&](std::size_t n) { return n == rows[0]; });
  out += t.text() + "  one activation or gradient: " + std::to_string(r.block_bytes) + " bytes" +
         (same ? "" : r.config.uneven == Uneven::pad ? " (every micro-batch padded to the largest)"
                                                     : " (the largest micro-batch; the others are shorter)") + "\n";
  const int denominator = v * m + p - 1;
  out += "  bubble: measured " + format_number(r.bubble_measured, "%.4f") + " on the logical clock, predicted " +
         (inter ? "(P-1)/(v m+P-1)" : "(P-1)/(m+P-1)") + " = " + std::to_string(p - 1) + "/" + std::to_string(denominator) +
         " = " + format_number(r.bubble_predicted, "%.4f") + "\n";
  if (inter && r.bubble_measured < 1)
    out += "          idle over ideal (busy) time: measured " +
           format_number(r.bubble_measured / (1 - r.bubble_measured), "%.4f") + ", (P-1)/(v m) = " + std::to_string(p - 1) +
           "/" + std::to_string(v * m) + " = " + format_number(double(p - 1) / (v * m), "%.4f") + "\n";
  out += "          wall clock " + format_number(r.wall_bubble, "%.4f") +
         " (threads or processes sharing this machine's cores: indicative only)\n";
  return out;
}

}  // namespace shardlab
