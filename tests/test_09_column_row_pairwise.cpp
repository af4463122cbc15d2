// Lesson 09: column-wise gathers, row-wise all-reduces, the FFN row then column needs both, the
// pairwise FFN one AllReduce; bytes from the ring formulas; the planner agrees; bad input exits 2;
// --inputs off the grid of eighths checked within bounds that still catch a planted error.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "harness/check/npz.hpp"
#include "tests/run_binary.hpp"

using shardlab::testing::run_binary;

namespace {

// Values off any grid: scale * sin(1 + 0.37 i), so every sum of x W_in and g W_out rounds.
shardlab::Tensor off_grid(const shardlab::Shape& shape, double scale) {
  shardlab::Tensor t = shardlab::Tensor::from_shape(shape);
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = scale * std::sin(1.0 + 0.37 * static_cast<double>(i));
  return t;
}

}  // namespace

TEST_SUITE("lessons") {
  TEST_CASE("lesson 09 (ffn column/row/pairwise) --json: AG h, AR h, AR h + AG y, AR y with ring bytes") {
    auto r = run_binary("09_column_row_pairwise --dtype float64 --json");
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    REQUIRE(j["collectives"].size() == 5);
    // B=8,S=4,M=16,H=64 on Y=4 (n=4), 8-byte doubles. h = x W_in is [8,4,64] = 2048 numbers, y [8,4,16] = 512.
    const char* op[] = {"all_gather", "all_reduce", "all_reduce", "all_gather", "all_reduce"};
    const char* tensor[] = {"h", "h", "h", "y", "y"};
    const double bytes[] = {3 * 512 * 8, 2 * 3 * 2048 * 8 / 4, 2 * 3 * 2048 * 8 / 4, 3 * 128 * 8, 2 * 3 * 512 * 8 / 4};
    for (int i = 0; i < 5; ++i) {
      CAPTURE(i);
      CHECK(j["collectives"][i]["op"] == op[i]);
      CHECK(j["collectives"][i]["tensor"] == tensor[i]);
      CHECK(j["collectives"][i]["bytes_per_device"].get<double>() == bytes[i]);
    }
    int agree = 0;
    for (const auto& c : j["checks"]) agree += c["name"].get<std::string>().rfind("planner agrees", 0) == 0 && c["pass"] == true;
    CHECK(agree == 4);
  }

  TEST_CASE("lesson 09 (ffn column/row/pairwise) text: the cuts, the side-by-side table, the verdict") {
    auto r = run_binary("09_column_row_pairwise --dtype float64");
    CHECK(r.status == 0);
    for (const char* s : {"W_in[M, H_Y]", "W_in[M_Y, H]", "x[B, S, M_Y]", "all_reduce h + all_gather y", "Pairwise sends 6144 bytes per device against 27648",
                          "Takeaway:", "Next:", "\nPASS 09_column_row_pairwise"})
      CHECK_MESSAGE(r.out.find(s) != std::string::npos, s);
  }

  TEST_CASE("lesson 09 (ffn column/row/pairwise) on 8 devices, a wrong reference, bad input") {
    CHECK(run_binary("09_column_row_pairwise --dtype float64 --mesh tp=8 --quiet").status == 0);
    auto f = run_binary("09_column_row_pairwise --dtype float64 --quiet --inject perturb:1e-9");
    CHECK(f.status == 1);
    CHECK(f.out.rfind("FAIL", 0) == 0);
    for (const char* bad : {"--mesh X=2,Y=2", "--dims M=6 --uneven none", "--dims H=0", "--uneven even"}) {
      auto b = run_binary(std::string("09_column_row_pairwise ") + bad);
      CAPTURE(bad);
      CHECK(b.status == 2);
      CHECK(shardlab::testing::count_lines(b.err) == 1);
    }
  }

  TEST_CASE("lesson 09 with M = 5 and H = 30 on Y=4: chunk and pad verified, bytes by the ring formulas") {
    // h [7,3,30] and y [7,3,5], 4-byte floats; 21 = 7 x 3 tokens. H over 4: 8, 8, 8, 6 (chunk)
    // or 8 each with 2 of padding (pad). Column-wise AllGather of h: a device sends every block
    // but its successor's; the most is 30 - 6 = 24 columns (device 2) under chunk, 3 x 8 under
    // pad: 24 x 21 x 4 = 2016 B both ways. Pairwise AllReduce of y, 105 floats in chunks 27, 26,
    // 26, 26: device r sends all but chunk r, then all but r + 1: 210 - 26 - 26 = 158 at most, 632 B.
    for (const char* mode : {"chunk", "pad"}) {
      const std::string cmd = std::string("09_column_row_pairwise --dims B=7,S=3,M=5,H=30 --uneven ") + mode;
      CAPTURE(cmd);
      auto r = run_binary(cmd + " --json");
      REQUIRE(r.status == 0);
      const auto j = nlohmann::json::parse(r.out);
      CHECK(j["pass"] == true);
      REQUIRE(j["collectives"].size() == 5);
      CHECK(j["collectives"][0]["bytes_per_device"] == 2016);
      CHECK(j["collectives"][4]["bytes_per_device"] == 632);
      CHECK(run_binary(cmd + " --inject perturb:1e-3 --quiet").status == 1);
      CHECK(run_binary(cmd + " --inject gather-offset --quiet").status == 1);
      // The sketch's pairwise bound sums ceil(H/n) = 8 terms a device here, not H/n.
      auto s = run_binary(cmd + " --verify sketch --json");
      REQUIRE(s.status == 0);
      CHECK(nlohmann::json::parse(s.out)["pass"] == true);
      CHECK(run_binary(cmd + " --verify sketch --inject gather-offset --quiet").status == 1);
    }
  }

  TEST_CASE("lesson 09 --verify sketch: y checked by projections; one wrong element on one device fails both") {
    // auto picks the element-by-element check at the default dims, and the sketch above 5e10 FLOPs
    // (--dims article, too slow for this suite); --verify sketch runs that path here.
    auto a = run_binary("09_column_row_pairwise --json");
    REQUIRE(a.status == 0);
    CHECK(nlohmann::json::parse(a.out)["verify"] == "full");
    for (const char* dtype : {"float32", "float64"}) {
      CAPTURE(dtype);
      auto r = run_binary(std::string("09_column_row_pairwise --verify sketch --json --dtype ") + dtype);
      REQUIRE(r.status == 0);
      const auto j = nlohmann::json::parse(r.out);
      CHECK(j["verify"] == "sketch");
      int sketched = 0;
      for (const auto& c : j["checks"]) sketched += c["name"].get<std::string>().find("(sketch)") != std::string::npos && c["pass"] == true;
      CHECK(sketched == 2);
    }
    // On one device no replica can disagree: the sketch alone must see the element off by 1e-3 of
    // y's RMS (perturb strikes each of the four runs once).
    auto f = run_binary("09_column_row_pairwise --verify sketch --mesh Y=1 --inject perturb:1e-3 --json");
    CHECK(f.status == 1);
    const auto j = nlohmann::json::parse(f.out);
    int failed = 0;
    for (const auto& c : j["checks"]) failed += c["name"].get<std::string>().find("(sketch)") != std::string::npos && c["pass"] == false;
    CHECK(failed == 2);
    for (const char* bad : {"--verify sketch --dtype bfloat16", "--verify nope", "--verify sketch --dims M=4194304"}) {
      auto b = run_binary(std::string("09_column_row_pairwise ") + bad);
      CAPTURE(bad);
      CHECK(b.status == 2);
      CHECK(shardlab::testing::count_lines(b.err) == 1);
    }
  }

  TEST_CASE("lesson 09 --inputs: x, W_in, W_out off the grid pass within bounds; a planted error of 1e-5 fails") {
    namespace fs = std::filesystem;
    const std::string dir = "/tmp/shardlab_test_09_" + std::to_string(::getpid()), file = dir + "/w.npz";
    fs::create_directories(dir);
    // The default dims: x [8,4,16], W_in [16,64], W_out [64,16]; |h| up to about 5, as a layer's.
    shardlab::save_npz(file, {{"x", off_grid({8, 4, 16}, 1.1)}, {"W_in", off_grid({16, 64}, 0.3)},
                              {"W_out", off_grid({64, 16}, 0.2)}});
    for (const char* dtype : {"float32", "float64", "bfloat16"}) {
      CAPTURE(dtype);
      auto r = run_binary("09_column_row_pairwise --inputs " + file + " --json --dtype " + dtype);
      REQUIRE(r.status == 0);
      const auto j = nlohmann::json::parse(r.out);
      CHECK(j["pass"] == true);
      int bounded = 0;  // the h and y checks: tolerances from the rounding analysis, none WEAK
      for (const auto& c : j["checks"])
        if (c["name"].get<std::string>().find("vs unsharded") != std::string::npos) {
          CAPTURE(c["name"]);
          CHECK(c["tolerance"].get<double>() > 0);
          CHECK(c["weak"] == false);
          CHECK(c["power"].get<double>() < c["power_floor"].get<double>() / 10);
          ++bounded;
        }
      CHECK(bounded == 4);
    }
    auto text = run_binary("09_column_row_pairwise --inputs " + file);
    CHECK(text.status == 0);
    CHECK(text.out.find("Inputs read from " + file + ": x (float64), W_in (float64), W_out (float64)") != std::string::npos);
    // One element of each run's result off by 1e-5 of itself, far below float32's floor of 1e-3:
    // the h checks and both y checks must see it (on one device, where no replica can disagree).
    auto f = run_binary("09_column_row_pairwise --inputs " + file + " --mesh Y=1 --inject perturb:1e-5 --json");
    CHECK(f.status == 1);
    int failed = 0;
    const auto fj = nlohmann::json::parse(f.out);
    for (const auto& c : fj["checks"])
      failed += c["name"].get<std::string>().find("vs unsharded") != std::string::npos && c["pass"] == false;
    CHECK(failed == 4);
    for (const char* bad : {"--verify sketch", "--dims M=8"}) {
      auto b = run_binary("09_column_row_pairwise --inputs " + file + " " + bad);
      CAPTURE(bad);
      CHECK(b.status == 2);
      CHECK(shardlab::testing::count_lines(b.err) == 1);
    }
    fs::remove_all(dir);
  }
}
