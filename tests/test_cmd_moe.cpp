// harness/cli/cmd_moe.cpp: `shardlab moe` runs lesson 20's mixture of experts. Expected by hand on
// X=4,Y=2 (8 devices, 16 tokens each, E = 8, top 2): C = 2 x 16 / 8 = 4 at capacity factor 1,
// each AllToAll sends half of [8, 4, 8] float64 elements: 128 x 8 = 1024 B.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "harness/check/npz.hpp"
#include "tests/run_binary.hpp"
#include "tests/verdict_powers.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

TEST_CASE("shardlab moe: --json verdict, capacity and bytes; --trace written; --inject caught; bad input refused") {
  auto r = run_binary("shardlab moe --mesh X=4,Y=2 --dtype float64 --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["case"] == "moe");
  CHECK(j["pass"] == true);
  CHECK(j["capacity"] == 4);
  CHECK(j["all_to_all_bytes_per_device"] == 1024);
  CHECK(j["dropped"].get<double>() > 0);
  for (const auto& c : j["collectives"])
    if (c["op"] == "all_to_all") CHECK(c["bytes_per_device"] == 1024);

  const std::string trace = "/tmp/shardlab_test_moe_trace_" + std::to_string(::getpid()) + ".json";
  CHECK(run_binary("shardlab moe --quiet --trace " + trace).status == 0);
  std::ifstream in(trace);
  REQUIRE(in.good());
  const auto t = nlohmann::json::parse(in);
  CHECK(t.dump().find("x_dispatch") != std::string::npos);
  std::remove(trace.c_str());

  auto text = run_binary("shardlab moe");
  CHECK(text.out.find("dW_router PASS (exact, no tolerance)\n") != std::string::npos);
  CHECK(text.out.find("gates against a plain softmax-top-k: PASS max_abs_err=") != std::string::npos);
  CHECK(shardlab::testing::verdicts_without_power(text.out).empty());  // "0 x RMS" too
  CHECK(text.out.find("\nPASS moe") != std::string::npos);
  for (const char* k : {"perturb:1e-3", "swap-blocks", "skip-add"})
    CHECK_MESSAGE(run_binary(std::string("shardlab moe --quiet --inject ") + k).status == 1, k);
  for (const char* bad : {"--experts 7", "--top-k 0", "--capacity-factor 0", "--mesh X=2,Y=2,Z=2"}) {
    auto b = run_binary(std::string("shardlab moe ") + bad);
    CHECK_MESSAGE(b.status == 2, bad);
    CHECK(count_lines(b.err) == 1);
    CHECK(b.out.empty());
  }
}

TEST_CASE("shardlab moe --inputs --save: the arrays' shape runs; a bad array or path is one sentence, nothing written") {
  namespace fs = std::filesystem;
  using shardlab::Tensor;
  const std::string dir = "/tmp/shardlab_test_cmd_moe_" + std::to_string(::getpid()), out = dir + "/out.npz";
  fs::create_directories(dir);
  const auto ones = [](const shardlab::Shape& s) {  // not ones: values that differ, so a swap shows
    Tensor t = Tensor::from_shape(s);
    for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = std::sin(0.5 + 0.83 * static_cast<double>(i));
    return t;
  };
  const std::vector<std::pair<std::string, Tensor>> good = {{"x", ones({8, 4})}, {"W_router", ones({4, 2})},
                                                            {"W_in", ones({2, 4, 3})}, {"W_out", ones({2, 3, 4})}};
  shardlab::save_npz(dir + "/in.npz", good);
  auto ok = run_binary("shardlab moe --mesh X=2 --inputs " + dir + "/in.npz --save " + out);
  REQUIRE(ok.status == 0);
  CHECK(ok.out.find("8 tokens of width 4, 2 experts (hidden 3) over X of X=2") != std::string::npos);
  CHECK(ok.out.find("generated (seeded, as without a file): dy") != std::string::npos);
  CHECK(ok.out.find("Saved 13 arrays to " + out) != std::string::npos);
  CHECK(shardlab::load_arrays(out).arrays.at("out").data.shape()[0] == 8);
  fs::remove(out);
  auto bad = good;
  bad[3].second = ones({2, 3, 5});
  shardlab::save_npz(dir + "/bad.npz", bad);
  bad.pop_back();
  shardlab::save_npz(dir + "/short.npz", bad);
  for (const std::string& line : {"--inputs " + dir + "/bad.npz --save " + out,    // W_out's m is 5
                                 "--inputs " + dir + "/short.npz --save " + out,  // no W_out
                                 "--inputs " + dir + "/in.npz --experts 4 --save " + out,
                                 "--inputs " + dir + "/in.npz --save " + dir + "/in.npz",
                                 "--inputs " + dir + "/in.npz --save /dev/full",
                                 "--inputs " + dir + "/in.npz --save " + dir + "/no/such/dir/out.npz",
                                 "--inputs " + dir + "/in.npz --mesh X=3 --save " + out}) {
    const auto r = run_binary("shardlab moe --mesh X=2 " + line);
    CAPTURE(line);
    CHECK(r.status == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.out.empty());
    CHECK(!fs::exists(out));
  }
  CHECK(run_binary("shardlab moe --mesh X=2 --quiet --inject swap-blocks --inputs " + dir + "/in.npz --save " + out)
            .status == 1);
  CHECK(!fs::exists(out));  // a failing run saves nothing
  fs::remove_all(dir);
}
