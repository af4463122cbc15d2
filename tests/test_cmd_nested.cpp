// harness/cli/cmd_nested.cpp: `shardlab nested` runs article 002's nested mesh as one model. By hand
// on the default X=4,Y=4 in float32 (tests/test_nested.cpp derives each): the busiest device sends
// 384 B in the embedding, 3072 B in the encoder's AllToAlls, 512 B between stages and 576 B in the
// softmax; the relayouts 128 B (batch to stages) and 384 B (stages to batch).
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>

#include "tests/run_binary.hpp"
#include "tests/verdict_powers.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

TEST_CASE("shardlab nested: the verdict, bytes per part in --json, the picture, lines of at most 100 columns") {
  auto r = run_binary("shardlab nested --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["case"] == "nested");
  CHECK(j["pass"] == true);
  CHECK(j["capacity"] == 2);
  const std::pair<const char*, double> parts[] = {{"bytes_embedding", 384},      {"bytes_to_stages", 128},
                                                  {"bytes_encoder_experts", 3072}, {"bytes_encoder_stages", 512},
                                                  {"bytes_to_batch", 384},       {"bytes_softmax", 576}};
  for (const auto& [key, b] : parts) CHECK_MESSAGE(j[key].get<double>() == b, key);

  auto text = run_binary("shardlab nested");
  REQUIRE(text.status == 0);
  CHECK(shardlab::testing::verdicts_without_power(text.out).empty());  // every verdict line states its power
  for (const char* line : {"X=0  | L0 e0-1 | L0 e2-3 | L0 e4-5 | L0 e6-7 |",
                           "  encoder stages   pipeline stages           -                   sends over X",
                           "  encoded: PASS (exact, no tolerance)", "\nPASS nested"})
    CHECK_MESSAGE(text.out.find(line) != std::string::npos, line);
  std::istringstream lines(text.out);
  for (std::string line; std::getline(lines, line);) CHECK_MESSAGE(line.size() <= 100, line);
}

TEST_CASE("shardlab nested: every mesh of two axes it accepts, one-device axes too; planted faults fail") {
  for (const char* mesh : {"X=1,Y=1", "X=4,Y=1", "X=1,Y=4", "X=2,Y=2", "X=8,Y=2 --layers 8", "X=2,Y=8 --experts 16"})
    CHECK_MESSAGE(run_binary(std::string("shardlab nested --quiet --mesh ") + mesh).status == 0, mesh);
  for (const char* dtype : {"bfloat16", "float64"})
    CHECK_MESSAGE(run_binary(std::string("shardlab nested --quiet --dtype ") + dtype).status == 0, dtype);
  for (const char* k : {"swap-blocks", "skip-add", "perturb:1e-3", "stale-receive"})
    CHECK_MESSAGE(run_binary(std::string("shardlab nested --quiet --inject ") + k).status == 1, k);
}

TEST_CASE("shardlab nested: bad input, one sentence on stderr, exit 2, nothing on stdout") {
  for (const char* bad : {"--batch 60", "--batch 0", "--batch -1", "--batch x", "--vocab 30", "--experts 6",
                          "--layers 3", "--top-k 9", "--capacity-factor 0", "--model 65", "--mesh X=4",
                          "--mesh A=2,B=2", "--collectives native --backend mpi",
                          // ran past 5 minutes; 1.3 GiB of expert slots
                          "--mesh X=1,Y=1 --batch 4096 --layers 16 --experts 64 --top-k 64 --model 64 --hidden 64 "
                          "--capacity-factor 1",
                          "--mesh X=1,Y=1 --batch 4096 --experts 64 --top-k 64 --capacity-factor 64"}) {
    auto b = run_binary(std::string("shardlab nested ") + bad);
    CHECK_MESSAGE(b.status == 2, bad);
    CHECK_MESSAGE(count_lines(b.err) == 1, bad);
    CHECK(b.out.empty());
  }
}
