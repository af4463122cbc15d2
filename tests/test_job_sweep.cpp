// The plan-model sweep (harness/jobs/job_sweep.cpp): every layout searched, by whether it fits.
#include <doctest/doctest.h>

#include "harness/jobs/job_search.hpp"
#include "harness/jobs/job_sweep.hpp"

using namespace shardlab;

TEST_SUITE("plan-model") {
  TEST_CASE("sweep: GPT-3 175B on 1024 A100s, the layouts that fit left of 80 GB, the plan the fastest of them") {
    const DatTable t = plan_model_sweep();
    REQUIRE(t.blocks.size() == 3);
    REQUIRE(t.blocks[0].rows.size() > 100);
    REQUIRE(t.blocks[1].rows.size() > 100);
    REQUIRE(t.blocks[2].rows.size() == 1);
    double fastest = 1e300;
    for (std::size_t i = 0; i < t.blocks[0].rows.size(); ++i) {
      CHECK(t.number(0, i, "memory_GB") <= 80.005);  // printed to 0.01 GB
      fastest = std::min(fastest, t.number(0, i, "step_s"));
    }
    for (std::size_t i = 0; i < t.blocks[1].rows.size(); ++i) CHECK(t.number(1, i, "memory_GB") >= 79.995);
    // The chosen layout: the fastest, or one without CP within kCpTie of a faster CP layout.
    CHECK(t.number(2, 0, "step_s") >= fastest);
    CHECK(t.number(2, 0, "step_s") <= fastest * (1 + kCpTie) + 0.0005);  // printed to 1 ms
  }
}
