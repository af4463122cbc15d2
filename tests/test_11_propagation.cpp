// Lesson 11: three annotations, thirteen tensors forward and backward; propagation derives h, g and
// y with their origins and the run makes lesson 08's four collectives with its bytes, then the seven
// of the hand-written backward; annotating x alone costs more; a corrupted reference is caught; a
// mesh that is not 2-D is refused.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

TEST_SUITE("lessons") {
  TEST_CASE("lesson 11 (propagation) --json: 3 of 13 annotated, lesson 08's collectives and bytes, then the backward's") {
    auto r = run_binary("11_propagation --json");
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    CHECK(j["annotated_tensors"] == 3);
    CHECK(j["tensors"] == 13);  // x W_in W_out h g y, dy dg dW_out gelu_grad_h dh dx dW_in
    REQUIRE(j["collectives"].size() == 11);
    // float32 on X=2,Y=4 with b=8,s=4,m=16,h=64: lesson 08's bytes (test_08 works them out in float64).
    const double bytes[] = {768, 512, 512, 768};
    const char* tensor[] = {"x", "W_in", "W_out", "y"};
    for (int i = 0; i < 4; ++i) {
      CAPTURE(i);
      CHECK(j["collectives"][i]["tensor"] == tensor[i]);
      CHECK(j["collectives"][i]["bytes_per_device"].get<double>() == bytes[i]);
    }
    // Backward: blocks of dy and x [4,4,4] gathered over Y=4 (3 x 64 floats), weights [8,16] over
    // X=2 (128 floats), gradients [16,16] / [4,4,16] reduce-scattered: (n-1)/n of 256.
    const double back[] = {768, 512, 512, 512, 768, 768, 512};
    const char* back_tensor[] = {"dy", "W_out", "dW_out", "W_in", "dx", "x", "dW_in"};
    for (int i = 0; i < 7; ++i) {
      CAPTURE(i);
      CHECK(j["collectives"][4 + i]["tensor"] == back_tensor[i]);
      CHECK(j["collectives"][4 + i]["bytes_per_device"].get<double>() == back[i]);
    }
  }

  TEST_CASE("lesson 11 (propagation) text: origins, the comparison with lesson 08, x alone") {
    auto r = run_binary("11_propagation");
    CHECK(r.status == 0);
    for (const char* s : {"h            bsh   h[B_X, S, H_Y]            from x and W_in through op 1",
                          "y            bsm   y[B_X, S, M_Y]            like x",
                          "4  forward   reduce_scatter y over Y            reduce_scatter y over Y",
                          "11  backward  reduce_scatter dW_in over X        reduce_scatter dW_in over X",
                          // x alone (X,_,Y, b=8 s=4 m=16 h=64 float32 on X=2,Y=4): the weights come
                          // back as W_in Y,_ and W_out _,Y, and h lies as propagation gives it,
                          // X,_,_. Gathering x over Y sends 3 x 64 floats (768 B), W_in's 8x64
                          // block over Y 3 x 512 floats (3072 B): 3840. With layouts = "auto" h
                          // lies as X,_,Y: x's gather (768 B), W_in's and W_out's Y moved onto h
                          // by AllToAll 3/4 of their 256-float blocks (768 B each), y's partial
                          // sums reduce-scattered over Y 3/4 of a 256-float block (768 B): 3072.
                          "costs 3840 bytes per device", "against 2560 with the weights annotated",
                          "h lies as propagation gives it, X,_,_", "instead: h X,_,Y, 3072 bytes per device",
                          "3 of 13 tensors", "the same backward collectives as shardlab ffn --backward: PASS",
                          "dW_in vs central differences: PASS", "Takeaway:", "Next:", "\nPASS 11_propagation"})
      CHECK_MESSAGE(r.out.find(s) != std::string::npos, s);
    auto bad = run_binary("11_propagation --inject perturb:1e-3 --quiet");
    CHECK(bad.status == 1);
    auto line = run_binary("11_propagation --mesh Y=4");
    CHECK(line.status == 2);
    CHECK(count_lines(line.err) == 1);
    CHECK(line.out.empty());
  }

  TEST_CASE("lesson 11: the words it uses first are explained where they appear") {
    const auto r = run_binary("11_propagation");
    CHECK(r.out.find("(all_to_all moves a tensor's split from one dim to another") != std::string::npos);
  }

  TEST_CASE("lesson 11's yes/no verdicts state their power: exact, no tolerance") {
    const auto r = run_binary("11_propagation");
    CHECK(r.out.find("the same collectives as lesson 08: PASS (exact, no tolerance)") != std::string::npos);
    CHECK(r.out.find("0 x RMS") == std::string::npos);
  }
}
