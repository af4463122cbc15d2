// Lesson 18 - sequence parallelism (Megatron-LM: Korthikanti et al. 2022, "Reducing Activation
// Recomputation in Large Transformer Models"; it extends article 003's Megatron layout).
//
// One idea: in Megatron's tensor parallelism every device holds the layer norms, residual adds and
// their activations whole, t copies of the same numbers. Those ops work token by token, so they can
// split over the sequence instead. Where Megatron all-reduces a block's partial sums, the sequence
// parallel layer reduce-scatters them over s, and all-gathers s again before the next block: an
// AllReduce is a ReduceScatter then an AllGather, so the bytes are the same, and the activations
// between the blocks shrink to 1/t per device. Nothing here is built by hand: x is annotated split
// over s, the weights as Megatron's, and the planner derives every other layout and collective
// (for the sequence layout, its layout search: layouts = "auto").
//
// Run:    build/bin/18_sequence_parallel [--mesh Y=4] [--json]
//         mpiexec -n 4 build/bin/18_sequence_parallel --backend mpi
// Prints: the mesh; both layouts' specs; each layout's collectives by pass and sublayer with bytes
//         per device; the activations held outside the blocks and the peak per device; the verdict
//         of both against the unsharded layer and central differences.
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/text.hpp"
#include "harness/check/session.hpp"
#include "core/table.hpp"
#include "harness/cli/cli.hpp"
#include "harness/models/case_run.hpp"
#include "harness/models/transformer_layer.hpp"

using namespace shardlab;

namespace {

struct Layout {
  std::string name, what, shard;  // shard lines; A stands for the mesh's axis
  bool search = false;            // layouts = "auto": the layout search places the other tensors
};

const std::vector<Layout> kLayouts = {
    {"megatron", "tensor parallel: heads and hidden split, x and the layer norms whole (lesson 13)",
     "x = \"_,_,_\"\nW_q = \"_,A,_\"\nW_k = \"_,A,_\"\nW_v = \"_,A,_\"\nW_o = \"A,_,_\"\nW_in = \"_,A\"\nW_out = \"A,_\"\n"},
    {"sequence", "the same, and x split over the sequence s",
     "x = \"_,A,_\"\nW_q = \"_,A,_\"\nW_k = \"_,A,_\"\nW_v = \"_,A,_\"\nW_o = \"A,_,_\"\nW_in = \"_,A\"\nW_out = \"A,_\"\n", true},
};

// What one run did, counted from its plan.
struct Tally {
  std::map<std::string, int> forward, backward;  // collective -> how many
  std::size_t forward_bytes = 0, backward_bytes = 0;
  std::vector<std::string> backward_all_reduced;  // tensors all-reduced in the backward
  std::size_t outside = 0;                        // bytes of the activations between the blocks
};

// Activations between the blocks: x and the forward tensors with only the dims b, s, m (the
// layer norms' statistics and outputs, the blocks' outputs, the residual sums).
bool outside_blocks(const TensorProgram& p, const std::string& t) {
  if (p.is_input(t)) return t == "x";
  return p.dims.at(t).find_first_not_of("bsm") == std::string::npos;
}

Tally tally(const ProgramPlan& plan, std::size_t forward_ops) {
  Tally r;
  for (const auto& o : plan.ops)
    for (const PlanStep* s : o.collectives()) {
      const bool fwd = o.op < forward_ops;
      (fwd ? r.forward : r.backward)[step_kind_name(s->kind)] += 1;
      (fwd ? r.forward_bytes : r.backward_bytes) += s->predicted_bytes;
      if (!fwd && s->kind == StepKind::all_reduce) r.backward_all_reduced.push_back(s->tensor);
    }
  const std::size_t eb = element_bytes(plan.dtype);
  for (const auto& t : plan.program.tensors()) {
    if (plan.gradient.gradient_of.count(t) || !outside_blocks(plan.program, t)) continue;
    bool made_forward = plan.program.is_input(t);
    for (std::size_t i = 0; i < forward_ops; ++i) made_forward = made_forward || plan.program.ops[i].out == t;
    if (made_forward)
      r.outside += element_count(local_shape(plan.mesh, plan.propagation.specs.at(t).spec, plan.program.shape(t))) * eb;
  }
  return r;
}

std::string counts(const std::map<std::string, int>& kinds) {
  std::vector<std::string> out;
  for (const auto& [kind, n] : kinds) out.push_back(std::to_string(n) + " " + kind);
  return out.empty() ? "none" : join(out, ", ");
}

// `items` joined by ", " into lines of at most `width` columns, each after `indent`.
std::string wrapped(const std::vector<std::string>& items, const std::string& indent, std::size_t width = 98) {
  std::string out, line = indent;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string item = items[i] + (i + 1 < items.size() ? "," : "");
    if (line.size() > indent.size() && line.size() + 1 + item.size() > width) {
      out += line + "\n";
      line = indent;
    }
    line += (line.size() > indent.size() ? " " : "") + item;
  }
  return out + line + "\n";
}

// 2. The two sets of annotations, and the specs propagation (and the layout search) gives.
void section_specs(std::ostream& out, const std::string& Y, const TensorProgram& forward,
                   const std::vector<ProgramPlan>& plans) {
  out << "2. Lesson 13's layer (" << forward.ops.size() << " ops, backward derived by rule), two sets of annotations;\n"
      << "   propagation gives every other tensor its spec, and for sequence the planner's layout search\n"
      << "   (layouts = \"auto\"): alone, propagation would keep x's split over s in q and h (a's s and\n"
      << "   W_q's heads both sit on " << Y << ": article 001 keeps the first operand's split),\n"
      << "   then move them by AllToAll; the search finds Megatron's gathers, which send fewer bytes:\n";
  Table specs({"tensor", "dims", "megatron", "sequence", "what it is"});
  const std::vector<std::pair<const char*, const char*>> shown = {
      {"x", "the layer's input"},           {"mu1", "layer norm 1's mean"},  {"a", "layer norm 1's output"},
      {"q", "queries, by heads"},           {"att", "attention's output"},   {"r1", "first residual sum"},
      {"f", "layer norm 2's output"},       {"h", "FFN hidden, by columns"}, {"y", "the layer's output"}};
  for (const auto& [name, what] : shown) {
    std::vector<std::string> row = {name, forward.dims.at(name)};
    for (const auto& p : plans) row.push_back(p.propagation.specs.at(name).spec.text());
    row.push_back(what);
    specs.add(row);
  }
  out << specs.text();
  for (const auto& l : kLayouts) out << "   " << l.name << ": " << l.what << "\n";
  out << "\n";
}

// 3. Collectives by pass, and in run order.
void section_collectives(std::ostream& out, const std::vector<CaseRun>& runs, const std::vector<Tally>& tallies) {
  out << "3. Collectives by pass (bytes per device, planned and matched by the ledger):\n";
  Table passes({"pass", "megatron", "bytes", "sequence", "bytes"});
  passes.add({"forward", counts(tallies[0].forward), std::to_string(tallies[0].forward_bytes),
              counts(tallies[1].forward), std::to_string(tallies[1].forward_bytes)});
  passes.add({"backward", counts(tallies[0].backward), std::to_string(tallies[0].backward_bytes),
              counts(tallies[1].backward), std::to_string(tallies[1].backward_bytes)});
  out << passes.text();
  for (std::size_t i = 0; i < runs.size(); ++i)
    out << "   " << kLayouts[i].name << ", in run order:\n" << wrapped(runs[i].collectives, "     ");
  out << "   An all_reduce is a reduce_scatter then an all_gather: the sequence layer stops halfway\n"
      << "   (att and ff leave the blocks split over s) and gathers a and f before the next block;\n"
      << "   k and v read a_t = rename(a), the copy gathered for q. The backward gathers a and f\n"
      << "   again for the weights' gradients, and the layer norms' gains and biases, now summed\n"
      << "   over a device's tokens only, are all-reduced: " << join(tallies[1].backward_all_reduced, ", ") << ".\n"
      << "   Those are the backward's " << tallies[1].backward_bytes - tallies[0].backward_bytes
      << " B more than megatron's, which keeps a and f whole on every device.\n\n";
}

// Differences as signed numbers: on one device the two layouts hold the same, and a peak may come
// out higher.
std::string difference(std::size_t a, std::size_t b, const char* less, const char* more) {
  return a >= b ? std::to_string(a - b) + " B " + less : std::to_string(b - a) + " B " + more;
}

// 4. Memory per device: between the blocks and at the peak.
void section_memory(std::ostream& out, Report& report, const std::vector<CaseRun>& runs,
                    const std::vector<Tally>& tallies, int t, DType dtype) {
  out << "4. Memory per device (float" << element_bytes(dtype) * 8 << " bytes as the runs held them):\n";
  Table mem({"layout", "between the blocks", "peak held", "planned peak"});
  for (std::size_t i = 0; i < runs.size(); ++i)
    mem.add({kLayouts[i].name, std::to_string(tallies[i].outside), std::to_string(runs[i].peak_bytes),
             std::to_string(runs[i].predicted_peak_bytes)});
  out << mem.text();
  out << "   between the blocks: x, the layer norms' statistics and outputs, att, ff and the residual\n"
      << "   sums (the forward's tensors of dims bsm and bs); the sequence layer holds 1/" << t << " of them,\n"
      << "   " << difference(tallies[0].outside, tallies[1].outside, "less", "more") << " per device, and its peak is "
      << difference(runs[0].peak_bytes, runs[1].peak_bytes, "lower", "higher") << "\n\n";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    report.numbers[kLayouts[i].name + "_bytes_per_device"] = static_cast<double>(runs[i].bytes_per_device);
    report.numbers[kLayouts[i].name + "_forward_bytes"] = static_cast<double>(tallies[i].forward_bytes);
    report.numbers[kLayouts[i].name + "_collectives"] = static_cast<double>(runs[i].collectives.size());
    report.numbers[kLayouts[i].name + "_between_blocks_bytes"] = static_cast<double>(tallies[i].outside);
    report.numbers[kLayouts[i].name + "_peak_bytes"] = static_cast<double>(runs[i].peak_bytes);
  }
}

// A claim of the lesson, checked and printed.
void claim(std::ostream& out, Report& report, const std::string& name, bool pass, const std::string& detail) {
  Verdict v;
  v.name = name;
  v.pass = pass;
  v.detail = pass ? "" : detail;
  report.checks.push_back(v);
  out << "   " << name << ": " << check_text(v) << "\n";
}

// The sequence layer's collectives against megatron's: the same forward bytes, the backward mirrored.
void claim_collectives(std::ostream& out, Report& report, const Tally& m, const Tally& s, int t) {
  if (t == 1) {  // a group of one device sums and gathers nothing: no collective is the right count
    claim(out, report, "on one device nothing moves, in either layout or pass",
          m.forward.empty() && m.backward.empty() && s.forward.empty() && s.backward.empty(),
          "sequence ran " + counts(s.forward) + " forward, " + counts(s.backward) + " backward; megatron " +
              counts(m.forward) + ", " + counts(m.backward));
    return;
  }
  claim(out, report, "sequence forward: 2 all_gathers and 2 reduce_scatters for megatron's 2 all_reduces",
        s.forward == std::map<std::string, int>{{"all_gather", 2}, {"reduce_scatter", 2}} &&
            m.forward == std::map<std::string, int>{{"all_reduce", 2}},
        "sequence ran " + counts(s.forward) + ", megatron " + counts(m.forward));
  claim(out, report, "sequence forward: the same bytes", s.forward_bytes == m.forward_bytes,
        std::to_string(s.forward_bytes) + " B against " + std::to_string(m.forward_bytes));
  std::size_t norm_params = 0;
  for (const auto& name : s.backward_all_reduced)
    norm_params += name == "dg1" || name == "dc1" || name == "dg2" || name == "dc2";
  claim(out, report,
        "sequence backward mirrored: 2 all_gathers + 2 re-gathers, 2 reduce_scatters, and only the "
        "layer norms' parameters all-reduced",
        s.backward.count("all_gather") && s.backward.at("all_gather") == 4 && s.backward.count("reduce_scatter") &&
            s.backward.at("reduce_scatter") == 2 && norm_params == s.backward_all_reduced.size() &&
            norm_params == 4,
        "ran " + counts(s.backward));
}

// 5. The verdict against the unsharded layer, the lesson's claims, and the takeaway.
void section_verdict(std::ostream& out, Report& report, const std::vector<CaseRun>& runs,
                     const std::vector<Tally>& tallies, int t) {
  out << "5. Verdict against the unsharded layer (y and the 11 gradients) and central differences:\n";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const int passed = add_layout_checks(report, kLayouts[i].name, runs[i], out);
    out << "   " << kLayouts[i].name << ": " << passed << " of " << runs[i].checks.size() << " checks pass\n";
  }
  const int rules = add_rule_checks(report, runs[0], out);
  out << "   gradient rules, once for the program: " << rules << " of " << runs[0].rule_checks.size() << " pass\n";
  const Tally& m = tallies[0];
  const Tally& s = tallies[1];
  claim_collectives(out, report, m, s, t);
  claim(out, report, "sequence: the activations between the blocks 1/" + std::to_string(t) + " of megatron's",
        s.outside * static_cast<std::size_t>(t) == m.outside,
        std::to_string(s.outside) + " B against " + std::to_string(m.outside));
  out << "\nTakeaway: split the layer norms and residuals over the sequence and the all_reduce each\n"
         "          block ends with becomes a reduce_scatter, its other half an all_gather before the\n"
         "          next block: the same bytes, and 1/t of the activations between the blocks.\n"
         "Next:     build/bin/shardlab run harness/cases/transformer_sequence_parallel.toml\n"
         "          the same layer as a case file, its collectives and bytes held to expectations.\n"
         "Exercise: build/bin/shardlab exercise --lesson 18\n";
}

}  // namespace

int main(int argc, char** argv) {
  Cli cli("18_sequence_parallel", "Lesson 18: a Transformer layer with sequence parallelism beside Megatron's", "Y=4");
  cli.inputs_option();  // --inputs FILE.npz: named input tensors read from it
  if (int status = cli.parse(argc, argv); status >= 0) return status;

  return guarded([&] {
    Session session("18_sequence_parallel", cli.common);
    const Mesh& mesh = session.mesh();
    if (mesh.rank() != 1)
      throw Error(ErrorKind::parse, "lesson 18 needs a line of devices like Y=4 (tensor parallelism), not " + mesh.text());
    const std::string Y = mesh.names()[0];
    const int t = mesh.axis_size(Y);
    auto& out = session.out();
    out << "1. Mesh " << mesh.text() << ": t = " << t << " devices of tensor parallelism\n" << mesh.picture() << "\n";

    std::vector<CaseFile> cases;
    std::vector<ProgramPlan> plans;
    for (const auto& l : kLayouts) {
      cases.push_back(layout_case((l.search ? "layouts = \"auto\"\n" : "") + transformer_layer_text(), "[shard]\n" + with_mesh_axes(l.shard, mesh),
                                  "layer_" + l.name, session, cli.common.seed));
      plans.push_back(plan_case(cases.back(), mesh));
    }
    section_specs(out, Y, cases[0].program, plans);

    std::vector<CaseRun> runs;
    for (std::size_t i = 0; i < cases.size(); ++i) runs.push_back(run_case(session, cases[i], plans[i], i == 0));
    if (!session.runtime().is_root()) return session.finish();
    std::vector<Tally> tallies;
    for (const auto& p : plans) tallies.push_back(tally(p, cases[0].program.ops.size()));

    section_collectives(out, runs, tallies);
    section_memory(out, session.report(), runs, tallies, t, session.dtype());
    section_verdict(out, session.report(), runs, tallies, t);
    return session.finish();
  });
}
