// harness/cli/cmd_adam.cpp: `shardlab adam` steps generated or saved tensors, saves NAME, m/NAME and
// v/NAME (the saved file, with a gradient added, is the next step's input: two steps of the command
// equal two of Adam::step), and refuses a bad flag, file or path in one sentence with nothing written.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "harness/check/npz.hpp"
#include "harness/models/training.hpp"
#include "tests/verdict_powers.hpp"
#include "tests/run_binary.hpp"

using namespace shardlab;
using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

TEST_CASE("shardlab adam: a step, --json, --save; the saved state steps on as Adam::step does; bad input exit 2") {
  namespace fs = std::filesystem;
  const std::string dir = "/tmp/shardlab_test_cmd_adam_" + std::to_string(::getpid()), out = dir + "/out.npz";
  fs::create_directories(dir);
  const auto text = run_binary("shardlab adam");
  CHECK(text.status == 0);
  CHECK(text.out.find("Adam's step on 32 elements of W against Adam written plainly: PASS") != std::string::npos);
  CHECK(text.out.find("\nPASS adam: step 1 on 1 parameter (") != std::string::npos);
  CHECK(shardlab::testing::verdicts_without_power(text.out).empty());  // every verdict line states its power
  const auto j = nlohmann::json::parse(run_binary("shardlab adam --step 4 --lr 0.5 --json").out);
  CHECK(j["pass"] == true);
  CHECK(j["step"] == 4);
  CHECK(j["lr"] == 0.5);
  CHECK(j["tensors"][0]["max_abs_update"].get<double>() > 0);

  const Tensor w = Tensor({1.0, -0.5, 2.0}), g1 = Tensor({0.3, 0.1, -2.0}), g2 = Tensor({-0.2, 0.4, 1.0});
  save_npz(dir + "/s1.npz", {{"w", w}, {"dw", g1}, {"extra", g1}});
  const auto first = run_binary("shardlab adam --inputs " + dir + "/s1.npz --lr 0.05 --save " + out);
  REQUIRE(first.status == 0);
  CHECK(first.out.find("in the file but no parameter, gradient or moment: extra") != std::string::npos);
  CHECK(first.out.find("Saved 3 arrays to " + out) != std::string::npos);
  const auto after = load_arrays(out).arrays;
  save_npz(dir + "/s2.npz", {{"w", after.at("w").data}, {"dw", g2}, {"m/w", after.at("m/w").data},
                             {"v/w", after.at("v/w").data}});
  REQUIRE(run_binary("shardlab adam --inputs " + dir + "/s2.npz --step 2 --lr 0.05 --quiet --save " + out).status == 0);
  AdamParams p;
  p.lr = 0.05;
  Adam adam(shape_of(w));
  Tensor want = w;
  adam.step(want, g1, 1, p);
  adam.step(want, g2, 2, p);
  CHECK(load_arrays(out).arrays.at("w").data == want);
  CHECK(load_arrays(out).arrays.at("v/w").data == adam.v);
  fs::remove(out);

  const std::vector<std::string> bad = {"--step 0", "--step 1.5", "--lr 0", "--beta2 1", "--eps -1", "--beta1 nan",
                                       "--inputs " + dir + "/s1.npz --step 2 --save " + out,  // no moments at step 2
                                       "--inputs " + dir + "/none.npz --save " + out,
                                       "--inputs " + dir + "/s1.npz --save /dev/full",
                                       "--inputs " + dir + "/s1.npz --save " + dir + "/s1.npz",
                                       "--save " + dir + "/no/such/out.npz"};
  for (const std::string& line : bad) {
    CAPTURE(line);
    const auto r = run_binary("shardlab adam " + line);
    CHECK(r.status == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.out.empty());
    CHECK(!fs::exists(out));
  }
  fs::remove_all(dir);
}
