// Lesson 15 - ZeRO: data parallelism that keeps one copy of everything between the devices
// (article 004, "ZeRO Data Parallel", and the ZeRO paper).
//
// The article's own example: three layers La, Lb, Lc whose weights are cut into pieces a0 a1 a2,
// b0 b1 b2, c0 c1 c2; device d keeps piece d of every layer and works on its own micro-batch x_d.
// A layer's whole weights exist only while that layer runs: an AllGather rebuilds them, the
// layer computes, they are dropped. Backward does the same from Lc back to La, and each weight
// gradient is reduce-scattered so that every device keeps the summed slice it owns.
//
// Plain data parallelism and ZeRO's three stages train the same model for a few Adam steps side
// by side: what each device holds (weights, gradients, Adam's m and v), the bytes each sends per
// step (from the ledger), and the weights at the end against the unsharded Adam run.
//
// Run:    build/bin/15_zero [--mesh X=3] [--json] [--trace FILE]
//         mpiexec -n 3 build/bin/15_zero --backend mpi
// Prints: the pieces each device owns; the backpacking picture; one ZeRO-3 step as device 0 makes
//         it; the stages side by side (held, bytes per step, against the formulas); the verdict.
#include <algorithm>
#include <string>
#include <vector>

#include "collectives/predict.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/spec.hpp"
#include "core/text.hpp"
#include "harness/check/session.hpp"
#include "core/table.hpp"
#include "harness/check/verify.hpp"
#include "harness/cli/cli.hpp"
#include "harness/models/case_run.hpp"
#include "harness/models/zero.hpp"
#include "harness/models/zero_run.hpp"

using namespace shardlab;

namespace {

const ZeroMode kModes[] = {ZeroMode::dp, ZeroMode::zero1, ZeroMode::zero2, ZeroMode::zero3};
const char* kWeights[] = {"A", "B", "C"};

// Held elements the stage's design predicts, from P parameters, device 0's share of them S (P/N
// when N divides the rows; its ceil(D/N) rows of each layer when not, under chunk and pad alike)
// and one layer L = D^2: what is whole stays P, what is split is S, and a split stage briefly holds
// one layer whole.
std::vector<double> held_formula(ZeroMode mode, double p, double s, double layer) {
  switch (mode) {
    case ZeroMode::dp: return {p, p, 2 * p};
    case ZeroMode::zero1: return {p, p, 2 * s};
    case ZeroMode::zero2: return {p, s + layer, 2 * s};
    case ZeroMode::zero3: return {s + layer, s + layer, 2 * s};
  }
  return {};
}

// Bytes the busiest device sends per step by the ring formulas (collectives/predict.hpp), per
// layer: plain DP one AllReduce of the layer (n chunks, the first e % n one longer); ZeRO-1 and 2 a
// ReduceScatter and an AllGather over the rows' parts (under pad every part is the padded ceil(D/N)
// rows), member r sending all but its own part, then all but r+1's; ZeRO-3 that and the backward's
// second gather. With N dividing D: 2(n-1)/n, 2(n-1)/n and 3(n-1)/n of the parameters' bytes.
double bytes_formula(ZeroMode mode, std::size_t d, const std::vector<std::size_t>& part_bytes, std::size_t eb) {
  const int n = static_cast<int>(part_bytes.size());
  if (mode == ZeroMode::dp) return 3.0 * double(predicted_bytes_sent("all_reduce", n, d * d * eb, eb));
  double most = 0;
  for (int r = 0; r < n; ++r)
    most = std::max(most, double(predicted_bytes_sent_v("reduce_scatter", part_bytes, r)) +
                              (mode == ZeroMode::zero3 ? 2.0 : 1.0) *
                                  double(predicted_bytes_sent_v("all_gather", part_bytes, r)));
  return 3 * most;
}

// How the layers' rows are cut over n devices.
struct Slices {
  std::vector<std::size_t> rows;   // real rows of each device
  std::vector<std::size_t> parts;  // elements of each device's slice of a layer, as stored and sent
  bool even = true;                // n divides the rows
  std::string pieces;              // "3 pieces of 4 rows", and how an uneven cut was made
};

Slices cut_layers(const ZeroModel& model, int n) {
  Slices sl;
  const std::size_t d = model.width;
  sl.rows = zero_slice_rows(model, n);
  sl.even = d % static_cast<std::size_t>(n) == 0;
  const bool pad = !sl.even && model.uneven == Uneven::pad;
  for (const std::size_t r : sl.rows) sl.parts.push_back((pad ? sl.rows.front() : r) * d);
  sl.pieces = std::to_string(n) + " pieces of " + std::to_string(sl.rows.front()) + " rows";
  if (!sl.even) {
    sl.pieces = std::to_string(n) + " pieces of ";
    for (std::size_t i = 0; i < sl.rows.size(); ++i) sl.pieces += (i ? ", " : "") + std::to_string(sl.rows[i]);
    sl.pieces += pad ? " rows (--uneven pad: each stored and sent as " + std::to_string(sl.rows.front()) +
                           ", zero rows after the real ones)"
                     : " rows (--uneven chunk: torch.chunk's cut, ceil(D/N) until the rows run out)";
  }
  return sl;
}

// 1. The pieces each device owns, and 2. the backpacking picture.
void section_pieces(std::ostream& out, const Mesh& mesh, const ZeroModel& model, const Slices& sl) {
  const int n = mesh.devices();
  const std::size_t d = model.width;
  out << "1. Mesh " << mesh.text() << ": " << n << " devices on one data axis.\n"
      << "   Three layers La, Lb, Lc with weights A, B, C of [" << d << ", " << d << "];\n   each cut by rows into "
      << sl.pieces << ".\n";
  Table own({"device", "La", "Lb", "Lc", "micro-batch"});
  for (int i = 0; i < n; ++i) {
    const std::string k = std::to_string(i);
    own.add({"device " + k, "a" + k, "b" + k, "c" + k,
             "x" + k + " [" + std::to_string(model.micro_batch) + ", " + std::to_string(d) + "]"});
  }
  out << own.text("   ") << "\n";

  out << "2. The backpack. Hikers who share a tent, a stove and an axe need not each carry all three:\n"
         "   each carries one, and at camp they lend each other what they lack. ZeRO does that with\n"
         "   the weights, gradients and optimizer state of data parallelism: each device stores only\n"
         "   its own pieces, and a layer is put together (AllGather) just before it runs, then let go.\n\n";
}

// What sections 3 to 5 read: the four stages' runs, in kModes' order.
struct Lesson {
  const Mesh& mesh;
  const ZeroModel& model;
  const Slices& slices;
  const std::vector<RunResult>& runs;
  std::size_t element_bytes;
  DType dtype;
  std::ostream& out;
  Report& report;
  double params() const { return 3.0 * static_cast<double>(model.width * model.width); }
  double layer() const { return static_cast<double>(model.width * model.width); }
};

// 3. One ZeRO-3 step as device 0 made it: its first calls, in order.
void section_zero3_step(const Lesson& L) {
  const auto& z3 = L.runs.back().ledger;
  std::vector<LedgerRow> first;
  for (const auto& r : z3)
    if (r.device == 0 && first.size() < 9) first.push_back(r);
  const char* phase[] = {"forward La", "forward Lb", "forward Lc", "backward Lc", "backward Lc", "backward Lb",
                         "backward Lb", "backward La", "backward La"};
  Table step({"", "phase", "collective", "tensor", "device 0 gets", "bytes sent"});
  for (std::size_t i = 0; i < first.size(); ++i) {
    const auto& r = first[i];
    const std::string piece = r.tensor.substr(3);  // "a", "dA" ...
    std::string gets;
    if (r.op == "all_gather")
      for (int j = 1; j < L.mesh.devices(); ++j) gets += (gets.empty() ? "" : " ") + piece + std::to_string(j);
    else
      gets = "sum of " + piece + " rows 0:" + std::to_string(L.slices.rows.front());
    step.add({std::to_string(i + 1), i < 9 ? phase[i] : "", r.op, r.tensor, gets, std::to_string(r.bytes_sent)});
  }
  L.out << "3. One ZeRO-3 training step on device 0 (from its ledger):\n"
        << (first.empty() ? "   (one device: nothing to gather)\n" : step.text("   "))
        << "   Each gathered layer is dropped once used; each gradient is reduce-scattered and only the\n"
           "   owned rows kept; Adam then updates the owned rows with the owned m and v. (The ledger's\n"
           "   names: z3_a is ZeRO-3's gathered copy of A, z3_dC the gradient of C being reduce-scattered.)\n\n";
}

// 4. The stages side by side: the most each device held and the most bytes one sent per step, each
// against its formula; then the ZeRO paper's bytes per device.
void section_stages(const Lesson& L) {
  const int n = L.mesh.devices();
  const double params = L.params(), layer = L.layer();
  Table side({"stage", "weights", "grads", "m and v", "bytes/step", "formula", "x plain DP"});
  std::vector<double> sent(4);
  Verdict held_ok, bytes_ok;
  held_ok.name = "held elements, as the program counts them, match each stage's formula";
  bytes_ok.name = "bytes per step match the ring formulas";
  std::vector<std::size_t> part_bytes;  // each device's slice of a layer, as sent
  for (const std::size_t e : L.slices.parts) part_bytes.push_back(e * L.element_bytes);
  for (std::size_t s = 0; s < 4; ++s) {
    const ZeroMode mode = kModes[s];
    double peak[3] = {0, 0, 0};
    for (const auto& o : L.runs[s].outputs)
      for (int k = 0; k < 3; ++k) peak[k] = std::max(peak[k], o.at("held").data()[k]);
    const auto want = held_formula(mode, params, 3.0 * double(L.slices.parts.front()), layer);
    for (int k = 0; k < 3; ++k) held_ok.pass = held_ok.pass && peak[k] == want[k];
    std::vector<double> bytes(static_cast<std::size_t>(n), 0.0);  // per device; the busiest counts
    for (const auto& r : L.runs[s].ledger) bytes[static_cast<std::size_t>(r.device)] += static_cast<double>(r.bytes_sent);
    sent[s] = *std::max_element(bytes.begin(), bytes.end()) / L.model.steps;
    const double f = bytes_formula(mode, L.model.width, part_bytes, L.element_bytes);
    bytes_ok.pass = bytes_ok.pass && sent[s] == f;
    const std::string label = zero_mode_label(mode);
    L.report.numbers["bytes_per_step_" + label] = sent[s];
    L.report.numbers["held_params_" + label] = peak[0];
    L.report.numbers["held_grads_" + label] = peak[1];
    L.report.numbers["held_states_" + label] = peak[2];
    side.add({zero_mode_name(mode), format_number(peak[0], "%.0f"), format_number(peak[1], "%.0f"),
              format_number(peak[2], "%.0f"), format_number(sent[s], "%.0f"), format_number(f, "%.0f"),
              sent[0] > 0 ? format_number(sent[s] / sent[0], "%.2f") : "-"});
  }
  L.report.checks.push_back(held_ok);
  L.report.checks.push_back(bytes_ok);
  if (n > 1 && L.slices.even) {  // uneven parts shift these ratios a little; the formulas above still hold
    Verdict ratio;
    ratio.name = "ZeRO-3 sends 1.5x plain DP; ZeRO-1 and 2 the same as plain DP";
    ratio.pass = sent[3] == 1.5 * sent[0] && sent[1] == sent[0] && sent[2] == sent[0];
    L.report.checks.push_back(ratio);
    L.report.numbers["zero3_over_dp"] = sent[3] / sent[0];
  }
  L.out << "4. The stages side by side: the most each device held at once (elements, as the program counts\n"
        << "   what it keeps; P = " << params << " weights) and the most bytes one sent per step\n   ("
        << dtype_text(L.dtype) << ", ledger), each against its formula:\n"
        << side.text("   ")
        << "   ZeRO-2 and -3 briefly hold one layer whole (" << layer << " elements) besides their slices.\n"
        << "   At the ZeRO paper's mixed precision (2 + 2 + 12 bytes per weight) the split alone (without that\n"
        << "   transient layer) gives:\n";
  Table paper({"stage", "bytes/device", "per weight"});
  for (const auto& st : zero_stages(params, n, "adam"))
    paper.add({st.name, format_number(st.memory_bytes(), "%.0f"), format_number(st.memory_bytes() / params, "%.2f")});
  L.out << paper.text("   ") << "   (shardlab zero --params 7.5B --devices 64 prices a real model.)\n\n";
}

// Step 1's gradients and the weights after the steps against the unsharded Adam run: the checks
// and a table row for each stage.
Table stage_verdicts(const Lesson& L, const ZeroReference& ref) {
  const Mesh& mesh = L.mesh;
  Table verdicts({"stage", "step-1 gradients: error (tol)", "weights after " + std::to_string(L.model.steps) + " steps", "",
                   "catches"});
  for (std::size_t s = 0; s < 4; ++s) {
    const bool split = kModes[s] != ZeroMode::dp;  // every stage but plain DP keeps its own rows
    const Spec rows_spec = Spec::parse(mesh.names()[0] + ",_"), whole_spec = Spec::parse("_,_");
    Verdict grads, weights;
    grads.name = "step-1 gradients dA, dB, dC, " + zero_mode_name(kModes[s]);
    weights.name = "A, B, C after " + std::to_string(L.model.steps) + " Adam steps, " + zero_mode_name(kModes[s]);
    for (int k = 0; k < 3; ++k) {
      const std::string g = std::string("d") + kWeights[k];
      const Verdict vg = verify_output(mesh, split ? rows_spec : whole_spec, L.runs[s], g, ref.gradient[k],
                                       ref.gradient_tolerance[k]);
      const Verdict vw = verify_output(mesh, kModes[s] == ZeroMode::zero3 ? rows_spec : whole_spec, L.runs[s],
                                       kWeights[k], ref.weights[k], ref.tolerance[k]);
      absorb(grads, vg, kWeights[k]);
      absorb(weights, vw, kWeights[k]);
    }
    auto cell = [](const Verdict& v) {
      return format_number(v.max_abs_error, "%.2g") + " (" + format_number(v.tolerance, "%.2g") + ")";
    };
    const Verdict& weaker = weights.power > grads.power ? weights : grads;
    verdicts.add({zero_mode_name(kModes[s]), cell(grads), cell(weights), grads.pass && weights.pass ? "PASS" : "FAIL",
                  power_cell(weaker)});
    L.report.checks.push_back(grads);
    L.report.checks.push_back(weights);
  }
  return verdicts;
}

// 5. The verdict against the unsharded Adam run, and the takeaway.
void section_verdict(const Lesson& L, const ZeroInputs& in) {
  const ZeroReference ref = zero_reference(L.model, in, L.dtype);
  Report& report = L.report;
  const std::size_t first_check = report.checks.size();
  const Table verdicts = stage_verdicts(L, ref);
  report.checks.push_back(ref.adam_scalar);  // the shared Adam against a plain one
  report.numbers["doubtful_weight_elements"] = static_cast<double>(ref.doubtful);
  L.out << "5. Verdict against the unsharded Adam run (the whole batch on one device):\n";
  for (std::size_t i = 0; i < first_check; ++i)
    L.out << "   " << report.checks[i].name << ": " << check_text(report.checks[i]) << "\n";
  L.out << verdicts.text("   ")
        << "   Gradients are summed over the devices' micro-batches (each one's loss divided by N), so\n"
           "   they equal the whole batch's; errors are the largest over elements, tol the largest bound.\n";
  if (ref.doubtful > 0)
    L.out << "   " << ref.doubtful << " of " << L.params() << " weight elements had a gradient within its rounding of\n"
          << "   zero at some step: Adam steps by about lr whatever the size, so there either sign may win\n"
          << "   and the weight check allows both.\n";
  if (ref.doubt_spreads)
    L.out << "   An update whose rounding could move it by lr/32 or more came before the last step: that\n"
             "   changes every later forward and gradient, so every weight is held only to 3 lr a step,\n"
             "   and the weight checks say WEAK.\n";
  L.out << "\nTakeaway: ZeRO keeps one copy of the training state spread over the devices; stages 1 and 2\n"
           "          cost no extra bytes, stage 3 sends 1.5x plain DP to split the weights too.\n"
           "Next:     build/bin/shardlab zero --params 7.5B --devices 64\n"
           "Exercise: build/bin/shardlab exercise --lesson 15\n";
}

}  // namespace

int main(int argc, char** argv) {
  Cli cli("15_zero", "Lesson 15: ZeRO stages 1-3 against plain data parallelism, article 004's La, Lb, Lc", "X=3");
  cli.mesh_follows_processes("X");
  cli.uneven_option();  // a device count that does not divide the layers' rows
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    Session session("15_zero", cli.common);
    const Mesh& mesh = session.mesh();
    if (mesh.rank() != 1) throw Error(ErrorKind::parse, "15_zero needs a mesh with one axis (the data axis), e.g. --mesh X=3");
    const int n = mesh.devices();
    if (n < 2)
      throw Error(ErrorKind::parse, "15_zero shards optimizer state over its data axis, and one device leaves nothing to "
                                    "shard; give 2 or more, e.g. --mesh X=3");
    ZeroModel model;
    model.uneven = mesh.uneven();
    const ZeroInputs in = zero_inputs(model, n, cli.common.seed);  // rows that do not split under none: refused
    const Slices slices = cut_layers(model, n);
    section_pieces(session.out(), mesh, model, slices);

    std::vector<RunResult> runs;
    for (ZeroMode mode : kModes) runs.push_back(session.run(zero_program(mode, model, in)));
    if (!session.runtime().is_root()) return session.finish();
    const Lesson L{mesh, model, slices, runs, session.element_bytes(), session.dtype(), session.out(), session.report()};
    section_zero3_step(L);
    section_stages(L);
    section_verdict(L, in);
    return session.finish();
  });
}
