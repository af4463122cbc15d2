#include "harness/jobs/job_miniature.hpp"

#include <algorithm>
#include <map>
#include <sstream>

#include "core/table.hpp"
#include "core/text.hpp"
#include "core/wrap.hpp"
#include "core/error.hpp"
#include "harness/check/report.hpp"
#include "harness/check/session.hpp"
#include "harness/models/three_d.hpp"

namespace shardlab {

int Miniature::matched() const {
  return static_cast<int>(std::count_if(terms.begin(), terms.end(), [](const MiniatureTerm& t) { return t.matched(); }));
}

bool Miniature::pass() const {
  return matched() == static_cast<int>(terms.size()) &&
         std::all_of(verdicts.begin(), verdicts.end(), [](const Verdict& v) { return v.pass; });
}

Layout miniature_layout(const Layout& chosen, std::string* note) {
  Layout l = chosen;
  if (chosen.devices() > 8) {
    l.dp = std::min(chosen.dp, 2), l.tp = std::min(chosen.tp, 2), l.pp = std::min(chosen.pp, 2), l.cp = 1;
    if (note)
      *note = "DP " + std::to_string(chosen.dp) + " x TP " + std::to_string(chosen.tp) + " x PP " +
              std::to_string(chosen.pp) + (chosen.cp > 1 ? " x CP " + std::to_string(chosen.cp) : "") + " needs " +
              std::to_string(chosen.devices()) +
              " devices: each degree is cut to min(degree, 2).";
  } else if (note) {
    *note = "The layout's own degrees: it needs " + std::to_string(chosen.devices()) + " devices.";
  }
  return l;
}

namespace {

// What the miniature program (three_d) runs of a layout, and a sentence for each thing it drops.
Layout runnable(const Layout& l, std::vector<std::string>& notes) {
  Layout r = l;
  r.ep = 1, r.cp = 1, r.sp = false, r.vp = 1, r.recompute = Recompute::none;
  r.zero = l.zero >= 2 ? 2 : 1;
  if (l.pp > 1)
    notes.push_back(std::string("The pipeline runs GPipe's order (every forward, then every backward)") +
                    (l.vp > 1 ? " with one stage a device, not " + std::to_string(l.vp) + " virtual ones" : "") +
                    ": 1F1B moves the same activations and gradients in another order.");
  if (l.zero == 0) notes.push_back("DP runs as ZeRO-1 (ReduceScatter, Adam on the owned rows, AllGather): the "
                                   "bytes of the AllReduce it replaces.");
  if (l.zero == 3) notes.push_back("ZeRO-3 runs as ZeRO-2: the miniature does not gather weights per layer.");
  if (l.recompute != Recompute::none)
    notes.push_back("No recomputation: the blocks keep their activations (its extra forward "
                    "AllReduces are not run).");
  if (l.sp) notes.push_back("TP runs without SP: an AllReduce where SP has an AllGather and a ReduceScatter.");
  if (l.ep > 1) notes.push_back("EP is not run: the blocks are dense.");
  if (l.cp > 1) notes.push_back("CP is not run: the blocks have no attention, so ring attention's K/V passes are "
                                "priced, not checked against a ledger.");
  return r;
}

// The plan's model of the miniature: one bare MLP block a stage, one token a sequence.
ModelSpec miniature_model(const ThreeDConfig& c) {
  ModelSpec m;
  m.name = "miniature", m.source = "harness/models/three_d.hpp";
  m.layers = c.pipe, m.hidden = static_cast<int>(c.width), m.ffn = static_cast<int>(c.hidden);
  m.heads = m.kv_heads = 1, m.seq = 1, m.vocab = 0;
  m.global_batch = double(c.data) * c.chunks * c.micro_batch;
  m.attention = false, m.biases = false, m.learned_positions = false;
  return m;
}

}  // namespace

namespace {

struct Prepared {
  Miniature mini;
  ThreeDConfig config;
};

Prepared prepare(const Layout& chosen, std::uint64_t seed) {
  Prepared r;
  Miniature& mini = r.mini;
  mini.chosen = chosen;
  std::string note;
  const Layout degrees = miniature_layout(chosen, &note);
  mini.notes.push_back(note);
  mini.run = runnable(degrees, mini.notes);
  ThreeDConfig& c = r.config;
  c.data = mini.run.dp, c.pipe = mini.run.pp, c.tensor = mini.run.tp;
  c.chunks = 2, c.zero_stage = mini.run.zero, c.seed = seed;
  mini.run.micro_batch = static_cast<int>(c.micro_batch);
  mini.model = miniature_model(c);
  mini.mesh = three_d_mesh(c);
  return r;
}

}  // namespace

std::string miniature_mesh(const Layout& chosen) { return prepare(chosen, 0).mini.mesh; }

Miniature run_miniature(const Layout& chosen, const CommonOptions& common) {
  CommonOptions o = common;
  o.mesh = miniature_mesh(chosen);
  o.quiet = true;
  Session session("plan-model --miniature", o);
  return run_miniature(chosen, session);
}

Miniature run_miniature(const Layout& chosen, Session& session) {
  Prepared prep = prepare(chosen, session.options().seed);
  Miniature& mini = prep.mini;
  const ThreeDConfig& c = prep.config;
  if (session.mesh().text() != mini.mesh)
    throw Error(ErrorKind::parse, "the miniature of " + chosen.text() + " runs on --mesh " + mini.mesh);
  mini.dtype = session.options().dtype;
  const ThreeDInputs in = three_d_inputs(c);
  const RunResult run = session.run(three_d_program(c, in));
  if (!session.runtime().is_root()) return mini;
  mini.verdicts = three_d_check(session.mesh(), c, run, three_d_reference(c, in, session.dtype()), "");

  const std::size_t eb = session.element_bytes();
  const std::map<std::string, std::string> part_of_axis = {{"T", "TP"}, {"P", "P2P"}, {"D", "DP"}};
  for (int id = 0; id < session.mesh().devices(); ++id) {
    const auto k = session.mesh().coords(id);
    std::map<std::string, double> model, ledger;
    for (const LedgerRow& r : run.ledger)
      if (r.device == id) ledger[part_of_axis.at(traffic_axis(r))] += static_cast<double>(r.bytes_sent);
    for (const CommTerm& t : comm_terms(mini.model, mini.run, k[1], double(eb), false))
      model[t.part] += comm_term_bytes_sent(t, eb, t.part == "TP" ? k[2] : k[0]);
    for (const char* part : {"TP", "P2P", "DP"})
      if (model[part] > 0 || ledger[part] > 0)
        mini.terms.push_back({part, id, k[0], k[1], k[2], model[part], ledger[part]});
  }
  return mini;
}

std::string miniature_text(const Miniature& m, bool per_device) {
  std::ostringstream out;
  const Layout& r = m.run;
  out << "\nMiniature run on sim (" << m.mesh << ", " << r.devices() << " devices, " << m.dtype
      << "): one MLP block a stage, width " << m.model.hidden << ", FFN " << m.model.ffn << ", "
      << micro_batches(m.model, r) << " micro-batches of " << r.micro_batch << ", ZeRO-" << r.zero << ".\n";
  for (const auto& n : m.notes) out << "  " << n << "\n";
  for (const auto& v : m.verdicts) out << "  " << v.name << ": " << v.line() << "\n";
  if (per_device) {
    Table t({"device", "D P T", "term", "plan's bytes", "ledger's bytes", ""});
    for (const auto& x : m.terms)
      t.add({std::to_string(x.device), std::to_string(x.d) + " " + std::to_string(x.p) + " " + std::to_string(x.t), x.part,
             format_number(x.model, "%.0f"), format_number(x.ledger, "%.0f"), x.matched() ? "=" : "DIFFERS"});
    out << t.text("  ");
  } else {
    for (const auto& x : m.terms)
      if (!x.matched())
        out << "  device " << x.device << " " << x.part << ": the plan has " << format_number(x.model, "%.0f")
            << " bytes, the ledger " << format_number(x.ledger, "%.0f") << "\n";
  }
  out << "Miniature run: " << (m.pass() ? "PASS" : "FAIL") << " (" << checks_power_phrase(m.verdicts, parse_dtype(m.dtype))
      << "); the plan's byte model matched the run's ledger byte for byte in " << m.matched() << " of "
      << m.terms.size() << " terms.\n";
  return wrap_lines(out.str());
}

}  // namespace shardlab
