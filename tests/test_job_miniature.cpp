// The miniature run (harness/jobs/job_miniature.hpp): the chosen layout's degrees on the sim mesh,
// its training step against the unsharded model, and the plan's byte model against the ledger.
#include <doctest/doctest.h>

#include "harness/jobs/job_miniature.hpp"

using namespace shardlab;

namespace {

Layout layout(int dp, int tp, int pp, int zero) {
  Layout l;
  l.dp = dp, l.tp = tp, l.pp = pp, l.zero = zero;
  return l;
}

}  // namespace

TEST_SUITE("plan-model") {
  TEST_CASE("miniature: DP 2 x TP 2 x PP 2, ZeRO-1 and ZeRO-2: the step is right and every byte term matches") {
    for (int zero : {1, 2}) {
      CAPTURE(zero);
      const Miniature m = run_miniature(layout(2, 2, 2, zero), CommonOptions{});
      CHECK(m.mesh == "D=2,P=2,T=2");
      REQUIRE(m.verdicts.size() == 3);
      for (const auto& v : m.verdicts) CHECK(v.pass);
      CHECK(m.terms.size() == 24);  // TP, P2P and DP on each of 8 devices
      CHECK(m.matched() == 24);
      CHECK(m.pass());
      // The ledger is not empty: a run that moved nothing would match a model of nothing.
      for (const auto& t : m.terms) CHECK(t.ledger > 0);
    }
  }

  TEST_CASE("miniature: degrees that need more than 8 devices are each cut to 2, and said so") {
    Layout big = layout(16, 8, 8, 0);
    big.vp = 2, big.sp = true, big.recompute = Recompute::full;
    std::string note;
    const Layout mini = miniature_layout(big, &note);
    CHECK(mini.dp == 2);
    CHECK(mini.tp == 2);
    CHECK(mini.pp == 2);
    CHECK(note.find("1024 devices") != std::string::npos);
    const Miniature m = run_miniature(big, CommonOptions{});
    CHECK(m.run.zero == 1);  // ZeRO-0 runs as ZeRO-1, whose bytes are the AllReduce's
    CHECK(m.notes.size() == 5);  // the cut, GPipe order, ZeRO-0, recomputation, SP
    CHECK(m.pass());
    const std::string text = miniature_text(m, false);
    CHECK(text.find("byte for byte in 24 of 24 terms") != std::string::npos);
    CHECK(text.find("Miniature run: PASS (weakest catches ") != std::string::npos);  // its power
  }

  TEST_CASE("miniature: a layout of 8 or fewer devices keeps its degrees (DP 4 x TP 2, no pipeline)") {
    const Miniature m = run_miniature(layout(4, 2, 1, 1), CommonOptions{});
    CHECK(m.mesh == "D=4,P=1,T=2");
    CHECK(m.terms.size() == 16);  // TP and DP on each of 8 devices, no P2P
    CHECK(m.pass());
  }
}
