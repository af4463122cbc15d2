// The chosen layout run in miniature: the same data, tensor and pipeline degrees (each cut to at
// most 2 when they need more than 8 devices) on the sim mesh D x P x T, with tiny dimensions, as
// harness/models/three_d.hpp's training step (a stack of MLP blocks, one a stage, ZeRO over D).
// Two checks: the step against the unsharded model (forward, backward, Adam), and every byte term
// of the plan's byte model (plan_model.hpp's comm_terms, evaluated at the miniature's size) against
// what each device sent in the run's ledger, exactly.
#pragma once
#include <string>
#include <vector>

#include "harness/check/options.hpp"
#include "harness/check/session.hpp"
#include "harness/check/verify.hpp"
#include "harness/jobs/plan_model.hpp"

namespace shardlab {

struct MiniatureTerm {
  std::string part;  // "TP", "P2P", "DP"
  int device = 0, d = 0, p = 0, t = 0;
  double model = 0, ledger = 0;  // bytes the device sent a step
  bool matched() const { return model == ledger; }
};

struct Miniature {
  Layout chosen, run;                   // the plan's layout, and the one run (degrees, ZeRO, schedule)
  ModelSpec model;                      // the miniature model the byte model is evaluated on
  std::string mesh, dtype;              // "D=2,P=2,T=2", "float32"
  std::vector<std::string> notes;       // what the miniature does not keep, each a sentence
  std::vector<MiniatureTerm> terms;
  std::vector<Verdict> verdicts;        // the step against the unsharded model
  int matched() const;
  bool pass() const;                    // every verdict passes and every term matches
};

// The degrees the miniature runs: the layout's own when DP x TP x PP <= 8, else each min(degree,
// 2); `note` says which.
Layout miniature_layout(const Layout& chosen, std::string* note);

// The mesh the miniature of `chosen` runs on: "D=2,P=2,T=2".
std::string miniature_mesh(const Layout& chosen);
// Runs on the backend of `common` (its mesh replaced by miniature_mesh; nothing printed), or in
// `session`, whose mesh must be miniature_mesh(chosen) (Error(parse) otherwise). Root only has the
// checks and terms.
Miniature run_miniature(const Layout& chosen, const CommonOptions& common);
Miniature run_miniature(const Layout& chosen, Session& session);

// The summary people read (its last line "the plan's byte model matched the run's ledger in N of N
// terms"); `per_device` adds the table of every term.
std::string miniature_text(const Miniature& m, bool per_device);

}  // namespace shardlab
