// The FFN strategies as data, the dims and a strategy's specs on a mesh (ffn_strategy.cpp).
#include <doctest/doctest.h>

#include "core/error.hpp"
#include "core/mesh.hpp"
#include "harness/models/ffn.hpp"

using namespace shardlab;

TEST_CASE("ffn: strategy table, dims text and bad input") {
  CHECK(ffn_strategy_names() == "gspmd|column|row|pairwise|row_column|data");
  const FfnDims d = parse_ffn_dims("h=128,B=2");
  CHECK(ffn_dims_text(d) == "B=2,S=4,M=16,H=128");
  CHECK(ffn_dims_text(parse_ffn_dims("article")) == "B=8,S=512,M=5120,H=20480");
  CHECK_THROWS_AS(parse_ffn_dims("Q=3"), Error);
  CHECK_THROWS_AS(parse_ffn_dims("B=0"), Error);
  CHECK_THROWS_AS(ffn_strategy("megatron"), Error);
  const Mesh line = Mesh::parse("Y=4"), grid = Mesh::parse("X=2,Y=4");
  const FfnDims small{8, 4, 16, 64};
  CHECK_THROWS_AS(ffn_specs(ffn_strategy("column"), grid, small), Error);               // needs one axis
  CHECK_THROWS_AS(ffn_specs(ffn_strategy("gspmd"), line, small), Error);                // needs two
  CHECK_THROWS_AS(ffn_specs(ffn_strategy("row"), line, FfnDims{8, 4, 6, 64}), Error);  // M=6 over 4
  CHECK(ffn_specs(ffn_strategy("pairwise"), line, small).w_in.text() == "_,Y");
}
