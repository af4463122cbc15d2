// The plain softmax-top-k against values worked by hand, and the check over a whole MoE batch.
#include <cmath>

#include <doctest/doctest.h>
#include "harness/models/moe_gate_check.hpp"

using namespace shardlab;

TEST_SUITE("moe gate check") {
  TEST_CASE("plain_softmax_top_k: the two largest logits, renormalised over the two") {
    const PlainRoute r = plain_softmax_top_k({1.0, 3.0, 2.0, 0.0}, 2);
    REQUIRE(r.experts == std::vector<int>{1, 2});
    // e^3 / (e^3 + e^2) = 1 / (1 + e^-1): the other experts' mass does not enter.
    CHECK(r.gates[0] == doctest::Approx(0.7310585786300049).epsilon(1e-15));
    CHECK(r.gates[1] == doctest::Approx(0.2689414213699951).epsilon(1e-15));
  }
  TEST_CASE("plain_softmax_top_k: a tie goes to the lower index, and k = E gives the full softmax") {
    CHECK(plain_softmax_top_k({2.0, 2.0, 1.0}, 1).experts == std::vector<int>{0});
    CHECK(plain_softmax_top_k({2.0, 2.0, 1.0}, 1).gates[0] == 1.0);
    const PlainRoute all = plain_softmax_top_k({0.0, std::log(3.0)}, 2);
    CHECK(all.experts == std::vector<int>{1, 0});
    CHECK(all.gates[0] == doctest::Approx(0.75).epsilon(1e-15));
  }
  TEST_CASE("gates_against_plain passes on a batch in every type, each gate within its rounding") {
    MoeShape s;
    const MoeInputs in = moe_inputs(s, 7);
    for (DType t : {DType::float64, DType::float32, DType::bfloat16}) {
      const Verdict v = gates_against_plain(in, s, t);
      CAPTURE(dtype_name(t));
      CHECK(v.pass);
      CHECK(v.power < 0);  // about the definition, not the sharded path
      CHECK(v.worst_ratio <= 1);
      CHECK(v.detail.find("128 tokens: the same experts") == 0);
    }
  }
}
