// harness/cli/cmd_cost.cpp: `shardlab cost` prints the cost model's numbers (checked here against the
// formulas by hand, through --json), names the crossover, and answers bad input with exit 2;
// `shardlab ffn --preset` adds the modeled step to the plan.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <tuple>

#include "tests/run_binary.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

TEST_CASE("shardlab cost --json: ring and doubling all_reduce on 4 devices of nvlink-a100, by hand") {
  const auto r = run_binary("shardlab cost --op all_reduce --bytes 4M --devices 4 --preset nvlink-a100 --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["rows"].size() == 2);
  // n = 4 MiB = 4194304 B, p = 4, launch 6.6 us a call and alpha 0.6 us a step (NCCL's ring/LL
  // latencies), links 300 GB/s, reduction 3000 GB/s (its datasheet figures).
  const double n = 4194304;
  const auto& ring = j["rows"][0];
  CHECK(ring["algorithm"] == "ring");
  CHECK(ring["calls"] == 1);
  CHECK(ring["steps"] == 6);
  CHECK(ring["bytes_sent_per_device"].get<double>() == doctest::Approx(1.5 * n));
  CHECK(ring["seconds"].get<double>() == doctest::Approx(6.6e-6 + 6 * 0.6e-6 + 1.5 * n / 300e9 + 0.75 * n / 3000e9));
  const auto& dbl = j["rows"][1];
  CHECK(dbl["algorithm"] == "recursive_doubling");
  CHECK(dbl["steps"] == 2);
  CHECK(dbl["seconds"].get<double>() == doctest::Approx(6.6e-6 + 2 * 0.6e-6 + 2 * n / 300e9 + 2 * n / 3000e9));
  // Ring wins above (6 - 2 steps) * 0.6 us / ((2 - 1.5) / 300e9 + (2 - 0.75) / 3000e9 s per byte):
  // both pay one launch.
  CHECK(j["ring_faster_above_bytes"]["all_reduce"]["nvlink-a100"].get<double>() ==
        doctest::Approx(4 * 0.6e-6 / (0.5 / 300e9 + 1.25 / 3000e9)));
  CHECK(j["presets"][0]["launch_s"].get<double>() == 6.6e-6);
  CHECK(j["presets"][0]["source"].get<std::string>().find("datasheet") != std::string::npos);
}

TEST_CASE("shardlab cost: tables for people, every preset, and the crossover line") {
  const auto r = run_binary("shardlab cost");
  REQUIRE(r.status == 0);
  for (const char* s : {"tpu-v2", "tpu-v4", "nvlink-a100", "ethernet-100g", "this-machine", "all_reduce on 8 devices",
                        "all_gather on 8 devices", "ring is faster above:"})
    CHECK_MESSAGE(r.out.find(s) != std::string::npos, s);
  // all_reduce (first) crosses over; all_gather sends the same bytes either way, so ring never wins.
  const std::string key = "ring is faster above: tpu-v2 ";
  const std::size_t first = r.out.find(key), second = r.out.find(key, first + 1);
  REQUIRE(second != std::string::npos);
  CHECK(r.out.compare(first + key.size(), 5, "never") != 0);
  CHECK(r.out.compare(second + key.size(), 5, "never") == 0);
  const auto six = run_binary("shardlab cost --devices 6 --op all_reduce");
  CHECK(six.status == 0);
  CHECK(six.out.find("needs a power-of-two group") != std::string::npos);
  // One convention with the lessons and nccl-tests: n devices in the group, S bytes of
  // the tensor; the header fits 100 columns.
  for (const char* s : {"n = devices in the group; S = bytes of the whole tensor",
                        "ring all_reduce 2(n-1)a + 2S(n-1)/n b + S(n-1)/n g", "doubling all_reduce log2(n) a"})
    CHECK_MESSAGE(r.out.find(s) != std::string::npos, s);
  CHECK(r.out.find("(p-1)") == std::string::npos);
  CHECK(r.out.find("log2(p)") == std::string::npos);
  const std::string header = r.out.substr(0, r.out.find("\nPresets"));
  std::size_t start = 0;
  for (std::size_t end; (end = header.find('\n', start)) != std::string::npos; start = end + 1)
    CHECK(end - start <= 100);
  const auto sources = run_binary("shardlab cost --sources --preset tpu-v2");
  CHECK(sources.out.find("Jouppi") != std::string::npos);
}

TEST_CASE("shardlab cost --axes: the wired time of a group over two wrapped axes of a TPU v4, by hand") {
  const auto r = run_binary("shardlab cost --op all_gather,all_to_all --bytes 16M --axes 4,4 --preset tpu-v4 --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["devices"] == 16);
  REQUIRE(j["wired"].size() == 2);
  const double n = 16777216;
  // all_gather over two wrapped axes: both directions of both, 15/16 of n; 2 + 2 hops of 1 us.
  CHECK(j["wired"][0]["hops"] == 4);
  CHECK(j["wired"][0]["seconds"].get<double>() == doctest::Approx(4e-6 + n * 15 / 16 / 4 / 45e9));
  // all_to_all of a 16 MiB buffer: a cut across one axis leaves 4 x 2 links each way; 8 devices on
  // each side send n/16 to each of 8: 4n bytes over 8 links.
  CHECK(j["wired"][1]["busiest_link_bytes"].get<double>() == doctest::Approx(n / 2));
  CHECK(j["presets"][0]["topology"] == "torus");
  const auto text = run_binary("shardlab cost --axes 4,4 --preset tpu-v4");
  CHECK(text.out.find("wired_us") != std::string::npos);
  CHECK(text.out.find("3D torus, wraps at 4") != std::string::npos);
}

TEST_CASE("shardlab cost: the launch term of every preset, in the tables and in --presets") {
  // A 1-byte all_reduce on 8 devices of nvlink-a100: launch + 14 alpha and a vanishing bandwidth term.
  const auto r = run_binary("shardlab cost --op all_reduce --bytes 1 --devices 8 --preset nvlink-a100 --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["rows"][0]["seconds"].get<double>() == doctest::Approx(6.6e-6 + 14 * 0.6e-6).epsilon(1e-6));
  const auto text = run_binary("shardlab cost");
  CHECK(text.out.find("L = launch, s per collective call") != std::string::npos);
  CHECK(text.out.find("launch_us") != std::string::npos);
  const auto presets = run_binary("shardlab cost --presets");
  REQUIRE(presets.status == 0);
  CHECK(presets.out.find("launch_us") != std::string::npos);
  CHECK(presets.out.find("all_reduce on") == std::string::npos);  // the presets only
  // Each preset's row: its launch, then its alpha, in us.
  for (const auto& [name, launch, alpha] : {std::tuple<std::string, std::string, std::string>{"nvlink-a100", "6.60", "0.60"},
                                            {"ethernet-100g", "6.60", "20.00"}, {"tpu-v4", "0.00", "1.00"}}) {
    CAPTURE(name);
    const std::size_t at = presets.out.find("\n  " + name + " ");
    REQUIRE(at != std::string::npos);
    std::istringstream row(presets.out.substr(at + 1, presets.out.find('\n', at + 1) - at - 1));
    std::string word, l, a;
    row >> word >> l >> a;
    CHECK(l == launch);
    CHECK(a == alpha);
  }
  std::size_t start = 0;
  for (std::size_t end; (end = presets.out.find('\n', start)) != std::string::npos; start = end + 1)
    CHECK(end - start <= 100);
  const auto sourced = run_binary("shardlab cost --presets --sources --preset nvlink-a100");
  CHECK(sourced.out.find("baseLatencies") != std::string::npos);
  CHECK(sourced.out.find("_collective_utils.py") != std::string::npos);
}

TEST_CASE("shardlab cost --op collective_permute: one block to one device, a + S b, by hand") {
  const auto r = run_binary("shardlab cost --op collective_permute --bytes 16M --preset nvlink-a100 --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["rows"].size() == 1);
  const auto& row = j["rows"][0];
  CHECK(row["op"] == "collective_permute");
  CHECK(row["steps"] == 1);
  CHECK(row["bytes_sent_per_device"] == 16777216.0);  // the whole block, to the next device
  // nvlink-a100: a launch of 6.6 us, 0.6 us per message, 300 GB/s per link each way.
  CHECK(row["seconds"].get<double>() == doctest::Approx(6.6e-6 + 0.6e-6 + 16777216.0 / 300e9));
  const auto text = run_binary("shardlab cost --op collective_permute --preset nvlink-a100");
  CHECK(text.out.find("(collective_permute: one block to one device, L + a + S b; S = the block)") != std::string::npos);
}

TEST_CASE("shardlab cost: bad input exits 2 with one sentence and prints nothing") {
  for (const std::string args : {"--devices 0", "--bytes 12Q", "--preset tpu-v9", "--op broadcast", "--axes 4,x",
                                 "--axes 4,0", "--axes 4,4 --devices 8", "--axes 512,512"}) {
    CAPTURE(args);
    const auto r = run_binary("shardlab cost " + args);
    CHECK(r.status == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.out.empty());
  }
}

TEST_CASE("shardlab ffn --preset: the plan with each collective's modeled time and the step's share") {
  const auto r = run_binary("shardlab ffn --dtype float64 --dims article --plan-only --preset tpu-v2 --json");
  REQUIRE(r.status == 0);
  const auto m = nlohmann::json::parse(r.out)["model"];
  REQUIRE(m["collectives"].size() == 4);
  // The AllGather of x over Y on the article's 2x4: [4,512,5120] float32 = 41943040 B, ring of 4,
  // TPU v2 links 62 GB/s one way, 1 us per step.
  CHECK(m["collectives"][0]["tensor"] == "x");
  CHECK(m["collectives"][0]["bytes"].get<double>() == 41943040.0);
  CHECK(m["collectives"][0]["seconds"].get<double>() == doctest::Approx(3e-6 + 41943040.0 * 0.75 / 62e9));
  // Two local products of 2 * 2048 * 5120 * 5120 FLOPs at 22.5 TFLOP/s.
  CHECK(m["compute_seconds"].get<double>() == doctest::Approx(2 * 2.0 * 2048 * 5120 * 5120 / 22.5e12));
  const double share = m["comm_share"].get<double>();
  CHECK(share > 0.15);  // article 001 measured about 20% on a TPU v2-8
  CHECK(share < 0.30);
  const auto text = run_binary("shardlab ffn --dtype float64 --dims article --plan-only --preset tpu-v2");
  CHECK(text.out.find("Modeled on tpu-v2") != std::string::npos);
  CHECK(text.out.find("% of the step") != std::string::npos);
  const auto bad = run_binary("shardlab ffn --dtype float64 --preset tpu-v9");
  CHECK(bad.status == 2);
  CHECK(count_lines(bad.err) == 1);
  CHECK(bad.out.empty());
  const auto run = run_binary("shardlab ffn --dtype float64 --strategy pairwise --preset nvlink-a100 --json");
  CHECK(run.status == 0);
  CHECK(nlohmann::json::parse(run.out)["model"]["collectives"].size() == 1);  // the AllReduce of y
}
