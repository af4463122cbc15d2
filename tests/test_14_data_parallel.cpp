// Lesson 14: one data-parallel step on 8 devices: only the two weight gradients are all-reduced,
// each sending 2(n-1)/n of its bytes; y, the gradients and the updated weights (the same on every
// device) equal the unsharded step; a corrupted reference is caught.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"

using shardlab::testing::run_binary;

TEST_SUITE("lessons") {
  TEST_CASE("lesson 14 (data parallel) --json: two AllReduces of 2(n-1)/n of the parameters") {
    auto r = run_binary("14_data_parallel --json");
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    // W_in [16, 64] and W_out [64, 16] in float32: 8192 bytes; 2 x 7/8 of them over 8 devices.
    CHECK(j["parameter_bytes"] == 8192);
    CHECK(j["bytes_per_device"] == 2 * 7 * 8192 / 8);
    REQUIRE(j["collectives"].size() == 2);
    for (const auto& c : j["collectives"]) CHECK(c["op"] == "all_reduce");
    CHECK(run_binary("14_data_parallel --inject perturb:1e-3 --quiet").status == 1);
    CHECK(run_binary("14_data_parallel --mesh X=1 --quiet").status == 0);  // one device: nothing moves
  }

  TEST_CASE("lesson 14 on 3 devices: a batch of 16 cut 6, 5, 5 (chunk) or padded to 6 each (pad)") {
    for (const char* mode : {"chunk", "pad"}) {
      const std::string cmd = std::string("14_data_parallel --mesh X=3 --uneven ") + mode;
      CAPTURE(cmd);
      auto r = run_binary(cmd + " --json");
      REQUIRE(r.status == 0);
      const auto j = nlohmann::json::parse(r.out);
      CHECK(j["pass"] == true);
      // Each gradient, 1024 floats, is all-reduced in ring chunks of 342, 341, 341; device r sends
      // every chunk but its own, then every chunk but r+1's: device 1 the most, 2048 - 341 - 341 =
      // 1366 floats = 5464 B per gradient (2 x 2/3 x 4096 = 5461.3 does not divide).
      CHECK(j["bytes_per_device"] == 2 * 5464);
      CHECK(run_binary(cmd + " --inject perturb:1e-3 --quiet").status == 1);
    }
    auto none = run_binary("14_data_parallel --mesh X=3 --uneven none");
    CHECK(none.status == 2);
    CHECK(none.err.find("is not divisible by mesh axis X (size 3)") != std::string::npos);
  }
}
