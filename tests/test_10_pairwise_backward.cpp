// Lesson 10: forward and backward collectives of column, row and pairwise sharding as article 003
// lists them, the gradients against the unsharded analytic ones and those against central
// differences, a wrong reference caught, bad input exits 2.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"

using shardlab::testing::run_binary;

TEST_SUITE("lessons") {
  TEST_CASE("lesson 10 (ffn backward) --json: column AG/AR, row AR/AG, pairwise one AR each way") {
    auto r = run_binary("10_pairwise_backward --dtype float64 --json");
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    CHECK(j["column_forward"] == "all_gather h over Y; all_gather y over Y");
    CHECK(j["column_backward"] == "all_reduce dg over Y; all_reduce dx over Y");
    CHECK(j["row_forward"] == "all_reduce h over Y; all_reduce y over Y");
    CHECK(j["row_backward"] == "all_gather dg over Y; all_gather dx over Y");
    CHECK(j["pairwise_forward"] == "all_reduce y over Y");
    CHECK(j["pairwise_backward"] == "all_reduce dx over Y");
    REQUIRE(j["collectives"].size() == 10);
    // Pairwise's two AllReduces: y and dx are [8,4,16] = 512 doubles, 2(n-1)/n of them over 4.
    CHECK(j["collectives"][8]["bytes_per_device"].get<double>() == 2 * 3 * 512 * 8 / 4);
    CHECK(j["collectives"][9]["bytes_per_device"].get<double>() == 2 * 3 * 512 * 8 / 4);
    int gradients = 0, differences = 0;
    for (const auto& c : j["checks"]) {
      const std::string n = c["name"];
      CHECK_MESSAGE(c["pass"] == true, n);
      gradients += n.find("vs unsharded analytic") != std::string::npos;
      differences += n.find("vs central differences") != std::string::npos;
    }
    CHECK(gradients == 9);  // dx, dW_in, dW_out for each of the three layouts
    CHECK(differences == 3);
  }

  TEST_CASE("lesson 10 (ffn backward) text: the flip table and the verdict") {
    auto r = run_binary("10_pairwise_backward --dtype float64");
    CHECK(r.status == 0);
    for (const char* s : {"h = x W_in", "dx = dh W_in^T", "y = g W_out", "dg = dy W_out^T", "column-wise, H kept",
                          "row-wise, H summed", "row-wise, M summed", "column-wise, M kept",
                          "pairwise  all_reduce y", "Takeaway:", "Next:", "\nPASS 10_pairwise_backward",
                          // r and the step explained, the batch caveat, a layout and pass column
                          "so dy = dL/dy = r", "a step e", "no mesh axis\n   splits the batch",
                          "#  layout    pass      collective", "8  pairwise  forward   all_reduce  Y     y",
                          "pairwise: dW_out vs unsharded analytic  PASS"})
      CHECK_MESSAGE(r.out.find(s) != std::string::npos, s);
  }

  TEST_CASE("lesson 10 (ffn backward): a wrong reference fails, bad input exits 2") {
    auto f = run_binary("10_pairwise_backward --dtype float64 --quiet --inject perturb:1e-9");
    CHECK(f.status == 1);
    CHECK(f.out.rfind("FAIL", 0) == 0);
    for (const char* bad : {"--mesh X=2,Y=2", "--dims H=30 --uneven none", "--mesh Y=0"}) {
      auto b = run_binary(std::string("10_pairwise_backward ") + bad);
      CAPTURE(bad);
      CHECK(b.status == 2);
      CHECK(shardlab::testing::count_lines(b.err) == 1);
    }
  }
}

// Issue 32: H=30 over Y=4 (chunk 8,8,8,6): the column cut's AllGather of h [7,3,30] sends every
// block but the 6-column one from the busiest device, 7*3*24 float64.
TEST_CASE("lesson 10 --uneven chunk|pad: B=7,S=3,M=5,H=30 verifies forward and backward; none refuses") {
  for (const char* u : {"chunk", "pad"}) {
    CAPTURE(u);
    auto r = run_binary(std::string("10_pairwise_backward --dtype float64 --dims B=7,S=3,M=5,H=30 --json --uneven ") + u);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    for (const auto& c : j["collectives"]) CHECK(c["bytes_per_device"] == c["predicted_bytes_per_device"]);
    if (std::string(u) == "chunk") {
      CHECK(j["collectives"][0]["tensor"] == "h");
      CHECK(j["collectives"][0]["bytes_per_device"] == 7 * 3 * 24 * 8);
    }
  }
  auto none = run_binary("10_pairwise_backward --dims B=7,S=3,M=5,H=30 --uneven none");
  CHECK(none.status == 2);
}
