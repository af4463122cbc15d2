// harness/plan/plan_text.cpp: a plan printed for people, every step with its bytes, and its one-line
// summary, on article 001's Case 1B (A _,Y x B X,_ on X=2,Y=4: each operand gathered in full).
#include <doctest/doctest.h>

#include <string>

#include "harness/plan/planner.hpp"

using namespace shardlab;

namespace {
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

TEST_SUITE("planner") {
  TEST_CASE("plan_text shows every step with its bytes; plan_summary is one line") {
    const Plan p = plan_contraction(Einsum::parse("ik,kj->ij"), Mesh::parse("X=2,Y=4"),
                                    {"A", Spec::parse("_,Y"), {4, 16}}, {"B", Spec::parse("X,_"), {16, 4}});
    const std::string t = plan_text(p);
    CHECK(has(t, "A[I, K_Y] x B[K_X, J] -> C[I, J]"));
    CHECK(has(t, "all_gather A"));
    // A's 4x16 doubles gathered from quarters: 3/4 of 512 bytes sent; B's halves: 1/2 of 512.
    CHECK(has(t, "384"));
    CHECK(has(t, "512 FLOPs"));
    CHECK(has(t, "predicted: 640 bytes sent per device in 2 collectives (8 B per element)"));
    CHECK(has(t, "sent/device"));
    CHECK(plan_summary(p) == "all_gather A over Y along dim 1; all_gather B over X along dim 0; contract ik,kj->ij");
  }
}
