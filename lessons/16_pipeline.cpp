// Lesson 16 - pipeline parallelism: layers cut into stages, the batch into micro-batches
// (article 004, "Naive Model Parallel (Vertical) and Pipeline Parallel").
//
// Cutting a model's layers over devices (vertical model parallelism) fits a larger model, but
// on its own only one device works at a time: each waits for the one before it forward, and for
// the one after it backward. A pipeline cuts the batch into micro-batches ("chunks") so the
// stages work on different ones at once; what stays idle - the bubble - shrinks to
// (P-1)/(m+P-1) of the time for P stages and m micro-batches. GPipe runs every forward and then
// every backward; 1F1B interleaves them once the pipe is full, so a stage keeps at most P-s
// micro-batches' activations instead of all m, for the same bubble. The interleaved schedule
// (Megatron-LM's) gives each device v smaller model chunks: the pipe fills and drains in smaller
// steps, and the bubble falls to (P-1)/(v m+P-1), for v times the messages. The gradients are
// summed over the micro-batches (gradient accumulation) and equal the whole batch's.
//
// Run:    build/bin/16_pipeline [--json] [--trace FILE]
//         mpiexec -n 4 build/bin/16_pipeline --backend mpi
// Prints: the article's naive split (8 layers on 2 devices); GPipe, 1F1B and interleaved on 4
//         devices with 4 micro-batches, each drawn as the article's figure from the order the
//         devices ran; the bubble against chunks; the article's batch arithmetic; the verdict.
#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "core/text.hpp"
#include "harness/check/session.hpp"
#include "core/table.hpp"
#include "harness/cli/cli.hpp"
#include "harness/models/case_run.hpp"
#include "harness/models/pipeline_run.hpp"

using namespace shardlab;

namespace {

// Prints `intro`, runs `c` on every device, and on the root draws the order the devices ran.
PipelineRun run_and_draw(Session& session, const PipelineConfig& c, const char* intro) {
  session.out() << intro;
  const PipelineRun r = run_pipeline(session, c);
  if (session.runtime().is_root()) session.out() << pipeline_text(r) << "\n";
  return r;
}

// 1. The article's naive vertical split: 8 layers on 2 devices, the whole batch at once.
void section_naive(Session& session, const PipelineConfig& naive) {
  run_and_draw(session, naive,
               "1. The article's naive vertical split: 8 layers, layers 0-3 on device 0 and 4-7 on device 1,\n"
               "   the whole batch at once (devices 2 and 3 sit this one out). Device 1 waits for device 0's\n"
               "   forward; device 0 waits for device 1's backward:\n\n");
}

// 2. GPipe on 4 stages with 4 micro-batches.
PipelineRun section_gpipe(Session& session, const PipelineConfig& gpipe) {
  return run_and_draw(session, gpipe,
                      "2. GPipe: 4 stages of 2 layers, the batch cut into chunks = 4 micro-batches. F_{s,c} is stage\n"
                      "   s's forward of micro-batch c. Every forward, then every backward, last micro-batch first -\n"
                      "   the picture of the GPipe paper that the article shows:\n\n");
}

// 3. 1F1B, and why its bubble stays GPipe's while its stashes shrink.
PipelineRun section_one_f_one_b(Session& session, const PipelineConfig& ofob, const PipelineRun& g) {
  const PipelineRun f =
      run_and_draw(session, ofob,
                   "3. 1F1B: once its pipe is full each stage alternates one forward and one backward, so a\n"
                   "   micro-batch's activations are dropped as soon as its backward has run:\n\n");
  if (session.runtime().is_root())
    session.out() << "   Why the bubble stays GPipe's: the idle ticks are the fill and the drain. The last stage\n"
                     "   cannot start before P-1 forwards have passed the stages before it, and the first stage\n"
                     "   must wait as long for the first gradient to come back; each device still runs m forwards\n"
                     "   and m backwards. 1F1B only reorders the work in the middle, so idle time and makespan stay\n"
                     "   the same. What it buys is memory: stage s holds at most P-s micro-batches' activations,\n"
                     "   never more than P whatever m is (above: "
                  << f.peak_stash[0] << " " << f.peak_stash[1] << " " << f.peak_stash[2] << " " << f.peak_stash[3]
                  << " on stages 0-3 against GPipe's " << g.peak_stash[0] << " on each;\n"
                     "   with m = 16, 4 against 16). So m can grow to shrink the bubble, activations staying put.\n\n";
  return f;
}

// 4, first half: the interleaved schedule's introduction and its run (the picture comes after the
// uneven run, which every device makes too).
PipelineRun interleaved_run(Session& session, const PipelineConfig& inter) {
  session.out() << "4. Interleaved 1F1B (Megatron-LM): the 8 layers become 8 virtual stages of 1 layer, and\n"
                   "   device d holds virtual stages d and d+4 (v = 2 model chunks). A micro-batch crosses every\n"
                   "   device twice, so the pipe fills and drains in steps of 1 layer instead of 2: the bubble\n"
                   "   falls to (P-1)/(v m+P-1) of the time, (P-1)/(v m) of the ideal time. F5,2 is virtual stage\n"
                   "   5 (device 1's second chunk) on micro-batch 2, and a tick is one layer here, two above.\n"
                   "   With m = P, Megatron's schedule runs every forward first; with m = 2P or more, its devices\n"
                   "   alternate forwards and backwards as 1F1B's do (see the second command under Next):\n\n";
  return run_pipeline(session, inter);
}

// Section 7's run, on every device before the root alone goes on. The report's figures stay the
// interleaved run's; this run's bytes are added beside them.
PipelineRun uneven_run(Session& session, const PipelineConfig& odd) {
  Report& report = session.report();
  const auto numbers = report.numbers;
  const auto strings = report.strings;
  const auto json = report.json;
  PipelineRun u;
  if (odd.uneven != Uneven::none) u = run_pipeline(session, odd);
  if (!session.runtime().is_root()) return u;
  const double odd_bytes = report.numbers["p2p_bytes"];
  report.numbers = numbers;
  report.strings = strings;
  report.json = json;
  if (odd.uneven != Uneven::none) report.numbers["uneven_p2p_bytes"] = odd_bytes;
  return u;
}

double messages(const PipelineRun& r) {
  double n = 0;
  for (int m : r.sent_messages) n += m;
  return n;
}

// The step's length in layer-times.
double makespan(const PipelineRun& r) {
  double end = 0;
  for (const auto& t : r.ticks) end = std::max(end, t.end);
  return end * r.config.layers / (r.config.stages * r.config.virtual_stages);
}

// 4, second half: the interleaved picture and what it costs against 1F1B.
void section_interleaved(std::ostream& out, Report& report, const PipelineConfig& gpipe, const PipelineRun& f,
                         const PipelineRun& i) {
  out << pipeline_text(i) << "\n";
  const double msgs_1f1b = messages(f), msgs_inter = messages(i);
  out << "   In layer-times the step takes " << format_number(makespan(f), "%.0f") << " with 1F1B and "
      << format_number(makespan(i), "%.0f") << " interleaved (busy " << 2 * gpipe.chunks * gpipe.layers / gpipe.stages
      << " per device either way).\n   The price: " << format_number(msgs_inter, "%.0f")
      << " point-to-point messages instead of " << format_number(msgs_1f1b, "%.0f")
      << " (2m(vP-1) against 2m(P-1)), and a longer\n   warm-up that stashes more (device 0: "
      << i.peak_stash[0] << " chunks of 1 layer, 1F1B " << f.peak_stash[0] << " micro-batches of 2 layers).\n\n";
  report.numbers["interleaved_p2p_messages"] = msgs_inter;
  report.numbers["one_f_one_b_p2p_messages"] = msgs_1f1b;
}

// 5. The bubble against chunks on 4 stages, on the logical clock, beside the formulas.
void section_chunks(std::ostream& out, Report& report, double message_ratio) {
  Table chunks({"chunks m", "gpipe", "1f1b", "(P-1)/(m+P-1)", "interleaved v=2", "(P-1)/(2m+P-1)", "1f1b stashes"});
  for (int m : {1, 2, 4, 8, 16, 32}) {
    std::vector<std::vector<PipeOp>> go, fo, io;
    std::string stashes;
    for (int s = 0; s < 4; ++s) {
      go.push_back(stage_order(PipeSchedule::gpipe, 4, m, s));
      fo.push_back(stage_order(PipeSchedule::one_f_one_b, 4, m, s));
      if (m % 4 == 0) io.push_back(stage_order(PipeSchedule::interleaved, 4, m, s, 2));
      stashes += (s ? " " : "") + std::to_string(stash_formula(PipeSchedule::one_f_one_b, 4, m, s));
    }
    const bool can = m % 4 == 0;  // interleaved runs micro-batches in groups of P
    chunks.add({std::to_string(m), format_number(bubble_fraction(logical_clock(go), 4), "%.4f"),
                format_number(bubble_fraction(logical_clock(fo), 4), "%.4f"), format_number(bubble_formula(4, m), "%.4f"),
                can ? format_number(bubble_fraction(logical_clock(io), 4), "%.4f") : "-",
                can ? format_number(bubble_formula(4, m, 2), "%.4f") : "-", stashes});
  }
  out << "5. The bubble against chunks on 4 stages (the schedules on the logical clock; GPipe stashes all m;\n"
         "   interleaved needs m a multiple of P):\n"
      << chunks.text("   ") << "   More chunks shrink the bubble, but each micro-batch gets smaller and less efficient.\n"
      << "   Article 004 says interleaving cuts the bubble 'by prioritizing backward passes'. That is\n"
      << "   two steps. Running a backward as soon as one is ready (1F1B) buys memory: at m = 8 stage 0\n"
      << "   stashes " << stash_formula(PipeSchedule::one_f_one_b, 4, 8, 0) << " micro-batches, not GPipe's "
      << stash_formula(PipeSchedule::gpipe, 4, 8, 0) << ", but the bubble stays "
      << format_number(bubble_formula(4, 8), "%.4f") << ". Cutting each stage\n"
      << "   into v = 2 model chunks then buys the bubble: the fill and drain take half as long, "
      << format_number(bubble_formula(4, 8, 2), "%.4f") << ",\n   paid with "
      << format_number(message_ratio, "%.1f") << " times the point-to-point messages (section 4).\n\n";
  report.numbers["interleaved_message_ratio"] = message_ratio;
}

// 6. The article's batch arithmetic.
void section_batch(std::ostream& out, Report& report) {
  const int mbs = 8, gas = 32, dp = 4;
  out << "6. The article's arithmetic: with data parallelism of degree " << dp << " beside the pipeline, a global\n"
      << "   batch of " << mbs * gas * dp << " is " << dp << " replicas x " << gas << " chunks x micro-batches of "
      << mbs << ": " << mbs << " x " << gas << " x " << dp << " = " << mbs * gas * dp << ".\n\n";
  report.numbers["global_batch"] = mbs * gas * dp;
}

// 7. Sizes that do not divide: 7 layers on 4 stages, a batch of 7 rows in 3 micro-batches.
void section_uneven(std::ostream& out, const PipelineConfig& odd, const PipelineRun& u) {
  out << "7. Sizes that do not divide (--uneven " << uneven_name(odd.uneven) << "): 7 layers on 4 stages and a batch of 7\n";
  if (odd.uneven == Uneven::none) {
    out << "   rows in 3 micro-batches are refused under --uneven none; run it with --uneven chunk\n"
           "   (the default) or pad:\n"
           "   build/bin/16_pipeline --uneven pad\n\n";
    return;
  }
  const std::vector<int> per = stage_layers(odd);
  const std::vector<std::size_t> rows = micro_batch_rows(odd);
  out << "   rows in 3 micro-batches, GPipe. Layers are cut as torch.chunk cuts them: " << per[0] << ", "
      << per[1] << ", " << per[2] << ", " << per[3] << "\n"
      << "   (a padded layer would change the result, so pad cuts layers the same way). Stage 3 holds\n"
         "   one layer to the others' two and idles half of each tick: an uneven cut costs balance, not\n"
         "   correctness. The batch: "
      << rows[0] << ", " << rows[1] << ", " << rows[2] << " rows,\n   "
      << (odd.uneven == Uneven::pad ? "each sent as " + std::to_string(micro_batch_stored(odd, 0)) +
                                          " rows, zero rows (with zero loss weights) after the real ones.\n\n"
                                    : "each sent as its real rows (--uneven pad sends 3 each).\n\n");
  out << pipeline_text(u) << "\n";
}

// 8. The verdict, and the takeaway.
void section_verdict(std::ostream& out, const Report& report) {
  out << "8. Verdict (gradients against the whole batch on one device, bubble, stashes, bytes):\n";
  for (const auto& v : report.checks) out << "   " << v.name << ": " << check_text(v) << "\n";
  out << "\nTakeaway: a pipeline keeps P devices busy on one model by cutting the batch; the bubble\n"
         "          (P-1)/(m+P-1) needs many micro-batches, 1F1B keeps fewer activations for the same,\n"
         "          and interleaving v model chunks per device cuts it to (P-1)/(v m+P-1) for more messages.\n"
         "Next:     build/bin/shardlab pipeline --stages 4 --chunks 16 --schedule 1f1b\n"
         "          build/bin/shardlab pipeline --schedule interleaved --virtual-stages 2 --chunks 8\n"
         "          build/bin/16_pipeline --uneven pad\n";
}

}  // namespace

int main(int argc, char** argv) {
  Cli cli("16_pipeline", "Lesson 16: pipeline parallelism - naive split, GPipe, 1F1B, interleaved, and the bubble",
          "X=4");
  cli.uneven_option();  // section 7's layers and batch that do not divide the stages
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    Session session("16_pipeline", cli.common);
    const Mesh& mesh = session.mesh();
    if (mesh.rank() != 1 || mesh.devices() != 4)
      throw Error(ErrorKind::parse, "16_pipeline runs 4 stages on a line of 4 devices: --mesh X=4 (mpiexec -n 4)");

    PipelineConfig naive;
    naive.stages = 2;
    naive.chunks = 1;
    naive.layers = 8;
    naive.schedule = PipeSchedule::naive;
    naive.seed = cli.common.seed;
    section_naive(session, naive);
    PipelineConfig gpipe = naive;
    gpipe.stages = 4;
    gpipe.chunks = 4;
    gpipe.schedule = PipeSchedule::gpipe;
    const PipelineRun g = section_gpipe(session, gpipe);
    PipelineConfig ofob = gpipe;
    ofob.schedule = PipeSchedule::one_f_one_b;
    const PipelineRun f = section_one_f_one_b(session, ofob, g);
    PipelineConfig inter = gpipe;
    inter.schedule = PipeSchedule::interleaved;
    inter.virtual_stages = 2;
    const PipelineRun i = interleaved_run(session, inter);
    // Real models rarely divide their stages: 7 layers on 4, a batch of 7 in 3 micro-batches.
    PipelineConfig odd = gpipe;
    odd.layers = 7;
    odd.chunks = 3;
    odd.batch = 7;
    odd.uneven = mesh.uneven();
    const PipelineRun u = uneven_run(session, odd);
    if (!session.runtime().is_root()) return session.finish();

    auto& out = session.out();
    Report& report = session.report();
    section_interleaved(out, report, gpipe, f, i);
    section_chunks(out, report, messages(i) / messages(f));
    section_batch(out, report);
    section_uneven(out, odd, u);
    section_verdict(out, report);
    return session.finish();
  });
}
