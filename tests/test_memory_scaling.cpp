// harness/models/memory_scaling.cpp: article 002's claim measured. GSPMD's FFN forward on 1 ... 64
// sim devices holds exactly 1/n of the unsharded step between stages (the formula, not the plan,
// is the expected value); its peak falls more slowly; a strategy that keeps weights whole does not
// fall as 1/n; too large a step is planned, not run.
#include <doctest/doctest.h>

#include "harness/models/memory_scaling.hpp"

using namespace shardlab;

TEST_CASE("memory_scaling: GSPMD's forward holds 1/n of the whole step, measured on 1 to 64 devices") {
  FfnConfig c;
  c.dims = parse_ffn_dims("B=8,S=4,M=16,H=64");
  const auto points = memory_scaling(c, 64);
  REQUIRE(points.size() == 7);
  // Unsharded, float32, between stages: x [8,4,16], W_in [16,64], W_out [64,16], h or g [8,4,64],
  // y [8,4,16] at most as the plan frees them; held x n must equal it exactly at every n.
  for (const auto& p : points) {
    CAPTURE(p.mesh);
    CHECK(p.measured);
    CHECK(p.held * static_cast<std::size_t>(p.devices) == p.unsharded_held);
    CHECK(p.peak > p.held);  // a matmul's gathered copies
  }
  CHECK(points[0].unsharded_held == 12288);  // 4 B x (x 512 + W_in 1024 + W_out 1024 + g 2048 - freed)
  // The peak times n grows: the transient gathers are split over one axis, not both.
  for (std::size_t i = 1; i < points.size(); ++i)
    CHECK(points[i].peak * points[i].devices > points[i - 1].peak * points[i - 1].devices);
  const std::string table = memory_scaling_table(points);
  CHECK(table.find("64  X=8,Y=8") != std::string::npos);
  CHECK(table.find("1.00") != std::string::npos);
}

TEST_CASE("memory_scaling: column parallelism keeps x whole, so it does not fall as 1/n; big steps are planned") {
  FfnConfig c;
  c.strategy = "column";
  c.dims = parse_ffn_dims("B=8,S=4,M=16,H=64");
  const auto points = memory_scaling(c, 8);
  REQUIRE(points.size() == 4);
  CHECK(points.back().held * 8 > points.back().unsharded_held);
  c.strategy = "gspmd";
  const auto planned = memory_scaling(c, 4, /*run_limit=*/0);
  REQUIRE(planned.size() == 3);
  for (const auto& p : planned) CHECK_FALSE(p.measured);
}
