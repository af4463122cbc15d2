// Lesson 08: the GSPMD FFN's collectives and bytes per device from the ring formulas, the rule
// table, the AllReduce alternative at twice the ReduceScatter's bytes, 1/8 of the FLOPs per device,
// a corrupted reference caught, bad input exits 2.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"

using shardlab::testing::run_binary;

namespace {
constexpr double kD = 8;  // bytes per double
}  // namespace

TEST_SUITE("lessons") {
  TEST_CASE("lesson 08 (gspmd ffn) --json: AllGather x, W_in, W_out, ReduceScatter y; AllReduce costs 2x") {
    auto r = run_binary("08_gspmd_ffn --dtype float64 --json");
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    REQUIRE(j["collectives"].size() == 6);  // the layer's four, then the second matmul with an AllReduce
    const char* op[] = {"all_gather", "all_gather", "all_gather", "reduce_scatter", "all_gather", "all_reduce"};
    const char* axes[] = {"Y", "X", "X", "Y", "X", "Y"};
    const char* tensor[] = {"x", "W_in", "W_out", "y", "W_out", "y_ar"};
    // B=8,S=4,M=16,H=64 on X=2,Y=4: x block [4,4,4] gathers 3 more over Y; W_in [8,16] and W_out
    // [16,8] one more over X; the partial y [4,4,16] keeps 1/4 (RS) or all of it (AR) over Y.
    const double bytes[] = {3 * 64 * kD, 128 * kD, 128 * kD, 3 * 256 * kD / 4, 128 * kD, 2 * 3 * 256 * kD / 4};
    for (int i = 0; i < 6; ++i) {
      CAPTURE(i);
      CHECK(j["collectives"][i]["op"] == op[i]);
      CHECK(j["collectives"][i]["axes"] == axes[i]);
      CHECK(j["collectives"][i]["tensor"] == tensor[i]);
      CHECK(j["collectives"][i]["bytes_per_device"].get<double>() == bytes[i]);
      CHECK(j["collectives"][i]["predicted_bytes_per_device"].get<double>() == bytes[i]);
    }
    CHECK(j["all_reduce_bytes_per_device"].get<double>() == 2 * j["reduce_scatter_bytes_per_device"].get<double>());
    CHECK(j["flops_per_device"].get<double>() * 8 == j["unsharded_flops"].get<double>());
    CHECK(j["stored_memory_per_device"].get<double>() * 8 == j["unsharded_stored_memory"].get<double>());
    CHECK(j["peak_memory_per_device"].get<double>() < j["unsharded_peak_memory"].get<double>());
    CHECK(j["forward"] == "all_gather x over Y; all_gather W_in over X; all_gather W_out over X; reduce_scatter y over Y");
  }

  TEST_CASE("lesson 08 (gspmd ffn) text: rules, specs, device (X=0,Y=1), the article's sizes, verdict") {
    auto r = run_binary("08_gspmd_ffn --dtype float64");
    CHECK(r.status == 0);
    for (const char* s : {"embed_kernel  X", "W_out[H_Y, M_X]", "h[B_X, S, H_Y]", "holds x[0:4, 0:4, 4:8]",
                          "no message after it", "reduce_scatter y: 1536 bytes/device   all_reduce y: 3072",
                          "every device a unique share", "60.0 MiB", "100.0 MiB", "Takeaway:", "Next:",
                          // the element type beside the article-size bytes, which are bytes sent
                          "(float64, 8 B per element)", "sent at B=8,S=512,M=5120,H=20480",
                          "\nPASS 08_gspmd_ffn"})
      CHECK_MESSAGE(shardlab::testing::flat(r.out).find(shardlab::testing::flat(s)) != std::string::npos, s);
  }

  TEST_CASE("lesson 08 (gspmd ffn) on other axis names and a 2x2 mesh") {
    auto r = run_binary("08_gspmd_ffn --dtype float64 --mesh rows=2,cols=4 --quiet");
    CHECK(r.status == 0);
    auto s = run_binary("08_gspmd_ffn --dtype float64 --mesh 2x2 --dims B=4,S=2,M=8,H=32 --json");
    REQUIRE(s.status == 0);
    CHECK(nlohmann::json::parse(s.out)["collectives"].size() == 6);
  }

  TEST_CASE("lesson 08 (gspmd ffn) fails on a wrong reference; bad input exits 2 with one sentence") {
    auto f = run_binary("08_gspmd_ffn --dtype float64 --quiet --inject perturb:1e-9");
    CHECK(f.status == 1);
    CHECK(f.out.rfind("FAIL", 0) == 0);
    for (const char* bad : {"--dims M=6 --uneven none", "--mesh Y=8", "--mesh X=3,Y=3 --uneven none", "--dims B=8,Q=2"}) {
      auto b = run_binary(std::string("08_gspmd_ffn ") + bad);
      CAPTURE(bad);
      CHECK(b.status == 2);
      CHECK(shardlab::testing::count_lines(b.err) == 1);
    }
  }

  TEST_CASE("lesson 08: memory per device measured on 1 to 64 devices, held falling as 1/n, peak not") {
    const auto r = run_binary("08_gspmd_ffn --json");
    REQUIRE(r.status == 0);
    const auto points = nlohmann::json::parse(r.out)["memory_scaling"];
    REQUIRE(points.size() == 7);
    for (const auto& p : points) {
      CHECK(p["measured"] == true);
      CHECK(p["held_bytes"].get<double>() * p["devices"].get<double>() == p["unsharded_held_bytes"].get<double>());
    }
    CHECK(points[6]["peak_bytes"].get<double>() * 64 > 3 * points[6]["unsharded_peak_bytes"].get<double>());
    const auto text = run_binary("08_gspmd_ffn").out;
    CHECK(text.find("What a device keeps between stages falls as 1/n: the article's claim.") != std::string::npos);
    // One ratio prints one way: section 6's "0.213 peak" and the sweep's sentence agree.
    CHECK(text.find("0.125 held, 0.213 peak") != std::string::npos);
    CHECK(text.find("this mesh's 0.213 peak beside its 0.125 held") != std::string::npos);
    CHECK(text.find("0.212") == std::string::npos);
    // The one-device run's peak is not the unsharded step's, and the lesson says why.
    const std::string flat = shardlab::testing::flat(text);
    CHECK(flat.find("Even on one device the step peaks at 24.0 KiB, not the unsharded 20.0 KiB") != std::string::npos);
    // What "held" counts, at the article's sizes too.
    CHECK(flat.find("held, here and above: the most a device keeps at one time between stages") != std::string::npos);
    // Article 002's claim at training scale: the transient gathers add under 1% to what a device keeps.
    const double share = nlohmann::json::parse(r.out)["training_peak_over_held"].get<double>();
    CHECK(share > 1.0);
    CHECK(share < 1.01);
    CHECK(flat.find("so it too falls as 1/n to within") != std::string::npos);
  }
}

// Issue 32: B=7 over X=2 (4, 3), M=5 over Y=4 (chunk 2,2,1,0; pad 2 each). AllGather x over Y:
// the busiest device (4 rows of B) sends every M row but the empty block's, 4*3*5 float64 (chunk),
// or 3 padded blocks of 2, 4*3*6 (pad); the AllReduce alternative of y [4,3,5] on 4: 2*3 ring
// chunks of 15 elements either way.
TEST_CASE("lesson 08 --uneven chunk|pad: B=7,S=3,M=5,H=30 verifies, bytes by the ring formula; none refuses") {
  for (const char* u : {"chunk", "pad"}) {
    CAPTURE(u);
    auto r = run_binary(std::string("08_gspmd_ffn --dtype float64 --dims B=7,S=3,M=5,H=30 --json --uneven ") + u);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    CHECK(j["collectives"][0]["tensor"] == "x");
    CHECK(j["collectives"][0]["bytes_per_device"] == (std::string(u) == "chunk" ? 4 * 3 * 5 * 8 : 4 * 3 * 6 * 8));
    for (const auto& c : j["collectives"]) {
      CHECK(c["bytes_per_device"] == c["predicted_bytes_per_device"]);
      if (c["tensor"] == "y_ar") CHECK(c["bytes_per_device"] == 2 * 3 * 15 * 8);
    }
  }
  auto none = run_binary("08_gspmd_ffn --dims B=7,S=3,M=5,H=30 --uneven none");
  CHECK(none.status == 2);
  CHECK(none.err.find("is not divisible by mesh axis") != std::string::npos);
}
