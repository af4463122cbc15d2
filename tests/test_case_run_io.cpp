// harness/models/case_run_io.cpp, and the case file's inputs_from and shardlab run's --inputs and
// --save that use it: arrays written here by save_npy (a writer test_npy holds to hand-laid bytes)
// replace the inputs they name, shapes are held to the dims or give the missing ones, and a run
// saves its outputs, gradients, dy and reference only when it passed; bad files exit 2 with one
// sentence and nothing written. power_limit against a hand-worked example and an outlier.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "core/error.hpp"
#include "core/text.hpp"
#include "harness/check/case_file.hpp"
#include "harness/check/npz.hpp"
#include "harness/models/case_run_io.hpp"
#include "tests/run_binary.hpp"

using namespace shardlab;
using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

namespace {

namespace fs = std::filesystem;

std::string scratch(const std::string& name) {
  const std::string dir = "/tmp/shardlab_test_case_run_io_" + std::to_string(::getpid());
  fs::create_directories(dir);
  return dir + "/" + name;
}

// The layer norm of tests/torch/layer_norm.toml: x (b=2, s=8, m=16), g and c (m), backward.
const std::string kCase = "tests/torch/layer_norm.toml";

Tensor filled(const Shape& shape, double scale) {
  Tensor t = Tensor::from_shape(shape);
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = scale * std::sin(1.0 + 0.37 * static_cast<double>(i));
  return t;
}

std::string error_of(const std::string& text, const std::string& inputs) {
  try {
    parse_case_file(text, scratch("c.toml"), inputs);
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("expected an error");
  return "";
}
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_SUITE("case_run_io") {
  TEST_CASE("case_inputs: arrays replace the inputs they name, the rest as generated, extras listed") {
    const std::string dir = scratch("inputs_dir");
    fs::create_directories(dir);
    const Tensor g = filled({16}, 2.0);
    save_npy(dir + "/g.npy", g, NpyType::float32);
    save_npy(dir + "/stray.npy", Tensor{1.0});
    const CaseFile c = read_case_file(kCase, dir);
    const CaseFile plain = read_case_file(kCase);
    InputsUsed used;
    const auto in = case_inputs(c, c.program, &used);
    const auto generated = program_inputs(plain.program, plain.seed);
    CHECK(in.at("g") == xt::cast<double>(xt::cast<float>(g)));  // as stored, float32
    CHECK(in.at("x") == generated.at("x"));
    CHECK(in.at("c") == generated.at("c"));
    CHECK(used.read == std::vector<std::string>{"g (float32)"});
    CHECK(used.generated == std::vector<std::string>{"x", "c"});
    CHECK(used.unused == std::vector<std::string>{"stray"});
    CHECK(has(used.text(), "Inputs read from " + dir + ": g (float32)"));
    fs::remove_all(dir);
  }

  TEST_CASE("shapes: held to the case's dims; a dim left out is read from the arrays, which must agree") {
    const std::string dir = scratch("dims_dir");
    fs::create_directories(dir);
    const std::string text = read_text_file(kCase, "case");
    save_npy(dir + "/x.npy", filled({2, 8, 12}, 1.0));
    CHECK(has(error_of(text, dir), dir + "/x.npy has shape (2, 8, 12): dim m of x (bsm) is 12, but the case's dims give m = 16"));
    // dims without m: x gives m = 12, and g of 12 agrees; c is generated with 12 elements.
    const std::string no_m = text.substr(0, text.find("dims = ")) + "dims = { b = 2, s = 8 }" +
                             text.substr(text.find('\n', text.find("dims = ")));
    save_npy(dir + "/g.npy", filled({12}, 1.0));
    const CaseFile c = parse_case_file(no_m, scratch("c.toml"), dir);
    CHECK(c.program.sizes.at('m') == 12);
    CHECK(case_inputs(c, c.program).at("c").shape()[0] == 12);
    save_npy(dir + "/g.npy", filled({10}, 1.0));
    CHECK(has(error_of(no_m, dir), "dim m of g (m) is 10, but " + dir + "/x.npy gives m = 12"));
    save_npy(dir + "/g.npy", filled({12, 1}, 1.0));
    CHECK(has(error_of(no_m, dir), "has shape (12, 1), 2 dims; the case's input g has 1 (m)"));
    fs::remove_all(dir);
    fs::create_directories(dir);
    save_npy(dir + "/other.npy", Tensor{1.0});
    const CaseFile o = read_case_file(kCase, dir);
    CHECK_THROWS_WITH_AS(case_inputs(o, o.program), doctest::Contains("names none of the inputs here (x, g, c"), Error);
    fs::remove_all(dir);
  }

  TEST_CASE("inputs_from is relative to the case file; --inputs takes its place") {
    const std::string dir = scratch("rel");
    fs::create_directories(dir + "/w");
    save_npy(dir + "/w/g.npy", filled({16}, 1.0));
    std::string text = read_text_file(kCase, "case");
    text.insert(text.find("dims = "), "inputs_from = \"w\"\n");
    std::ofstream(dir + "/case.toml") << text;
    const CaseFile c = read_case_file(dir + "/case.toml");
    CHECK(c.inputs_from == dir + "/w");
    CHECK(c.input_files.arrays.count("g") == 1);
    CHECK(has(error_of(text, ""), "no such file or folder"));  // relative to scratch(), where w is not
    fs::remove_all(dir);
  }

  TEST_CASE("power_limit: the element with the largest tolerance plus error, over the RMS") {
    // want RMS = sqrt((9 + 16 + 0 + 0) / 4) = 2.5; tol + err = 0.1, 0.2 + 0.05, 0.3, 0: element 2.
    const Tensor want = {{3, -4}, {0, 0}}, got = {{3.1, -4.05}, {0, 0}}, tol = {{0, 0.2}, {0.3, 0}};
    const PowerLimit l = power_limit("y", got, want, tol);
    CHECK(l.index == "[1, 0]");
    CHECK(l.tolerance == 0.3);
    CHECK(l.power == doctest::Approx(0.3 / 2.5));
    CHECK(l.rms == doctest::Approx(2.5));
    CHECK(has(l.text(), "y at [1, 0]: tolerance 0.3 + error 0 there (value 0), against the RMS 2.5 of y"));
  }
}

TEST_SUITE("case_run_io: shardlab run --inputs --save") {
  TEST_CASE("a passing run saves outputs, gradients, dy and ref/; the saved file works as --inputs again") {
    const std::string dir = scratch("save");
    fs::create_directories(dir);
    const Tensor dy = filled({2, 8, 16}, 0.5);
    save_npy(dir + "/dy.npy", dy, NpyType::float32);
    save_npy(dir + "/x.npy", filled({2, 8, 16}, 3.0));
    const auto r = run_binary("shardlab run " + kCase + " --inputs " + dir + " --save " + dir + "/out.npz");
    CHECK(r.status == 0);
    CHECK(has(r.out, "Inputs read from " + dir + ": x (float64), dy (float32)"));
    CHECK(has(r.out, "generated (seeded, as without a file): g, c"));
    CHECK(has(r.out, "Saved 9 arrays to " + dir + "/out.npz"));
    const NamedArrays out = load_arrays(dir + "/out.npz");
    for (const std::string name : {"y", "dx", "dg", "dc", "dy", "ref/y", "ref/dx", "ref/dg", "ref/dc"}) CHECK(out.arrays.count(name));
    CHECK(out.arrays.at("dy").data == xt::cast<double>(xt::cast<float>(dy)));
    // dc = sum of dy over b and s (y = ... + c): a gradient known without shardlab.
    const Tensor dc = xt::sum(xt::cast<double>(xt::cast<float>(dy)), {0, 1});
    CHECK(xt::amax(xt::abs(out.arrays.at("dc").data - dc))() < 1e-5);
    CHECK(xt::amax(xt::abs(out.arrays.at("y").data - out.arrays.at("ref/y").data))() < 1e-5);
    const auto again = run_binary("shardlab run " + kCase + " --inputs " + dir + "/out.npz --quiet");
    CHECK(again.status == 0);
    fs::remove_all(dir);
  }

  TEST_CASE("wrong shape, wrong type, truncated, a failing run, an unusable path: exit 2 (1), nothing written") {
    const std::string dir = scratch("bad");
    fs::create_directories(dir);
    const std::string out = dir + "/out.npz";
    const auto refused = [&](const std::string& inputs, const std::string& sentence, int status = 2) {
      CAPTURE(inputs);
      const auto r = run_binary("shardlab run " + kCase + " --inputs " + inputs + " --save " + out + " --quiet");
      CHECK(r.status == status);
      if (status == 2) CHECK(count_lines(r.err) == 1);
      CHECK(has(r.err + r.out, sentence));
      CHECK(!fs::exists(out));
    };
    save_npy(dir + "/x.npy", filled({2, 8, 15}, 1.0));
    refused(dir, "dim m of x (bsm) is 15");
    fs::remove(dir + "/x.npy");
    const std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (16,), }\n";
    std::string npy = "\x93NUMPY";
    npy += std::string("\x01\x00", 2) + static_cast<char>(header.size()) + '\0' + header;
    std::ofstream(dir + "/g.npy", std::ios::binary) << npy << std::string(64, '\0');
    refused(dir, "holds dtype '<i4'");
    save_npy(dir + "/g.npy", filled({16}, 1.0));
    save_npz(dir + "/w.npz", {{"g", filled({16}, 1.0)}, {"x", filled({2, 8, 16}, 1.0)}});
    const std::string whole = read_text_file(dir + "/w.npz", "npz");
    std::ofstream(dir + "/cut.npz", std::ios::binary) << whole.substr(0, whole.size() - 100);
    refused(dir + "/cut.npz", "not a readable .npz file");
    refused(dir + " --inject perturb:1", "FAIL", 1);  // a planted bug: the run fails, nothing is saved
    const auto full = run_binary("shardlab run " + kCase + " --inputs " + dir + " --save /dev/full --quiet");
    CHECK(full.status == 2);
    CHECK(has(full.err, "/dev/full: it exists and is not a regular file"));
    const auto same = run_binary("shardlab run " + kCase + " --inputs " + dir + "/w.npz --save " + dir + "/w.npz --quiet");
    CHECK(same.status == 2);
    CHECK(read_text_file(dir + "/w.npz", "npz") == whole);
    fs::remove_all(dir);
  }

  TEST_CASE("an outlier in a weight: the element that limits the power is one it touches") {
    // y = x W (m -> h) on X=2; W[5, 3] = 1000 widens the bounds of y[:, :, 3] only.
    const std::string dir = scratch("outlier");
    fs::create_directories(dir);
    std::ofstream(dir + "/c.toml") << "name = \"outlier\"\nmesh = \"X=2\"\ndims = { b = 2, m = 8, h = 6 }\n"
                                      "inputs = { x = \"bm\", W = \"mh\" }\nshard = { x = \"_,X\", W = \"X,_\" }\n"
                                      "ops = [ { out = \"y\", op = \"einsum\", eq = \"bm,mh->bh\", in = [\"x\", \"W\"] } ]\n"
                                      "outputs = [\"y\"]\n";
    Tensor w = filled({8, 6}, 1.0);
    w(5, 3) = 1000;
    save_npy(dir + "/W.npy", w);
    const auto r = run_binary("shardlab run " + dir + "/c.toml --inputs " + dir + " --json");
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    const std::string index = j["power_limits"][0]["index"];
    CHECK(index.substr(index.size() - 3) == " 3]");
    fs::remove_all(dir);
  }
}

TEST_SUITE("case_run_io: lessons --inputs") {
  TEST_CASE("lessons 08 (FFN), 12 (attention) and 19 (ring attention) run on arrays off any grid; a wrong shape exits 2") {
    const std::string dir = scratch("lessons");
    fs::create_directories(dir);
    // Off the grid of eighths the FFN's sums are not exact: its checks must use bounds, not 0.
    save_npy(dir + "/W_in.npy", filled({16, 64}, 0.3), NpyType::float32);
    save_npy(dir + "/x.npy", filled({2, 8, 16}, 1.1));  // lesson 12's x; lesson 08's is (8, 4, 16)
    save_npy(dir + "/q.npy", filled({64, 16}, 0.7));
    const auto l12 = run_binary("12_attention --inputs " + dir + " --quiet");
    CHECK(l12.status == 0);
    CHECK(has(l12.out, "PASS"));
    const auto l19 = run_binary("19_context_parallel --inputs " + dir + " --quiet");
    CHECK(l19.status == 0);
    const auto l08 = run_binary("08_gspmd_ffn --inputs " + dir + " --quiet");  // x is lesson 12's shape
    CHECK(l08.status == 2);
    CHECK(count_lines(l08.err) == 1);
    CHECK(has(l08.err, dir + "/x.npy has shape (2, 8, 16); the input x here is (8, 4, 16)"));
    fs::remove(dir + "/x.npy");
    const auto ok08 = run_binary("08_gspmd_ffn --inputs " + dir + " --quiet");
    CHECK(ok08.status == 0);
    fs::remove_all(dir);
  }
}
