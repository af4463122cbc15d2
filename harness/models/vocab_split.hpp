// Lesson 03's --vocab section: a real vocabulary does not divide its mesh. GPT-2's
// 50257 rows of the unembedding W[M, V] split over a line of devices, logits[B, V] = h[B, M] W[M, V]
// computed per block and all-gathered, once with each rule of core/mesh.hpp's Uneven: chunk (the
// last blocks shorter, as DTensor) and pad (every block ceil(V/n), zeros after, as JAX). Each run is
// verified against the unsharded product and its ledger against the plan.
#pragma once
#include <string>
#include <vector>

#include "collectives/runtime.hpp"
#include "harness/check/report.hpp"

namespace shardlab {

struct VocabSplit {
  std::string text;                           // the section, for people (root only)
  std::vector<Verdict> checks;                // per rule: logits against unsharded, ledger against plan
  std::vector<CollectiveSummary> collectives;  // the two runs' AllGathers
};

// `devices` on a line (axis X), `vocab` rows (50257), B = 4 and M = 16, integers, so sums are exact.
VocabSplit run_vocab_split(Runtime& runtime, int devices, std::size_t vocab, std::uint64_t seed);

}  // namespace shardlab
