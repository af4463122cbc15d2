// harness/models/moe_io.cpp: the MoE's shape read from a user's arrays (each disagreement one
// sentence naming both arrays), and --save's routing held to a softmax-top-k and a capacity count
// written here, token by token, from the saved logits (not shardlab's route_token).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "core/error.hpp"
#include "harness/check/npz.hpp"
#include "harness/models/moe_io.hpp"
#include "tests/run_binary.hpp"

using namespace shardlab;
using shardlab::testing::run_binary;

namespace {

namespace fs = std::filesystem;

NamedArrays arrays(const std::vector<std::pair<std::string, Shape>>& shapes) {
  NamedArrays a;
  a.source = "in.npz";
  for (const auto& [name, shape] : shapes) a.arrays[name] = NpyArray{Tensor(xt::zeros<double>(shape)), NpyType::float32};
  return a;
}

std::string error_of(const NamedArrays& a) {
  try {
    moe_shape_of(a, MoeShape{});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

Tensor wave(const Shape& shape, double scale, double phase) {
  Tensor t = Tensor::from_shape(shape);
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = scale * std::sin(phase + 0.61 * static_cast<double>(i));
  return t;
}

}  // namespace

TEST_SUITE("moe_io") {
  TEST_CASE("moe_shape_of: T, m from x, E from W_router, h from W_in; a missing or disagreeing array is named") {
    const MoeShape s = moe_shape_of(arrays({{"x", {12, 6}}, {"W_router", {6, 3}}, {"W_in", {3, 6, 5}},
                                            {"W_out", {3, 5, 6}}}), MoeShape{});
    CHECK(s.tokens == 12);
    CHECK(s.model == 6);
    CHECK(s.experts == 3);
    CHECK(s.hidden == 5);
    CHECK(s.top_k == 2);  // the options' own
    CHECK(error_of(arrays({{"x", {12, 6}}, {"W_router", {6, 3}}, {"W_out", {3, 5, 6}}})).find("holds no array W_in") !=
          std::string::npos);
    CHECK(error_of(arrays({{"x", {12, 6}}, {"W_router", {6, 3}}, {"W_in", {3, 6, 5}}, {"W_out", {3, 4, 6}}})) ==
          "in.npz:W_out.npy has 4 in dim 1, where W_in gives h = 5");
    CHECK(error_of(arrays({{"x", {12, 6}}, {"W_router", {7, 3}}, {"W_in", {3, 6, 5}}, {"W_out", {3, 5, 6}}})) ==
          "in.npz:W_router.npy has 7 in dim 0, where x gives m = 6");
    CHECK(error_of(arrays({{"x", {12}}, {"W_router", {6, 3}}, {"W_in", {3, 6, 5}}, {"W_out", {3, 5, 6}}})) ==
          "in.npz:x.npy has 1 dims; x here has 2");
  }

  TEST_CASE("--save: experts and gates are a softmax-top-k of the saved logits; slots count arrivals to C") {
    const std::string dir = "/tmp/shardlab_test_moe_io_" + std::to_string(::getpid());
    fs::create_directories(dir);
    const std::size_t T = 16, m = 4, E = 4, h = 6, K = 2, G = 4, C = 2;  // C = ceil(2 x 4 / 4)
    save_npz(dir + "/in.npz", {{"x", wave({T, m}, 1.0, 0.3)}, {"W_router", wave({m, E}, 2.0, 1.1)},
                               {"W_in", wave({E, m, h}, 0.5, 0.7)}, {"W_out", wave({E, h, m}, 0.5, 0.2)}});
    const auto r = run_binary("shardlab moe --mesh X=2,Y=2 --dtype float64 --quiet --inputs " + dir +
                              "/in.npz --save " + dir + "/out.npz");
    REQUIRE(r.status == 0);
    const NamedArrays out = load_arrays(dir + "/out.npz");
    const auto& a = out.arrays;
    CHECK(a.at("capacity").data(0) == C);
    CHECK(a.at("dy").data.shape()[0] == T);  // generated, as the run used it
    const Tensor &logits = a.at("logits").data, &experts = a.at("experts").data, &gates = a.at("gates").data;
    const Tensor &slot = a.at("slot").data, x = wave({T, m}, 1.0, 0.3), w = wave({m, E}, 2.0, 1.1);
    Tensor kept = xt::zeros<double>({G, E}), routed = kept;
    double dropped = 0;
    for (std::size_t t = 0; t < T; ++t) {
      std::vector<std::size_t> order = {0, 1, 2, 3};
      for (std::size_t e = 0; e < E; ++e) {
        double l = 0;
        for (std::size_t j = 0; j < m; ++j) l += x(t, j) * w(j, e);
        CHECK(logits(t, e) == doctest::Approx(l).epsilon(1e-14));
      }
      std::sort(order.begin(), order.end(), [&](std::size_t p, std::size_t q) { return logits(t, p) > logits(t, q); });
      const double z = std::exp(logits(t, order[0])) + std::exp(logits(t, order[1]));
      for (std::size_t k = 0; k < K; ++k) {
        const std::size_t e = order[k], g = t / (T / G);
        CHECK(experts(t, k) == e);
        CHECK(gates(t, k) == doctest::Approx(std::exp(logits(t, e)) / z).epsilon(1e-14));
        const bool keep = kept(g, e) < C;
        CHECK(slot(t, k) == (keep ? kept(g, e) : -1.0));
        kept(g, e) += keep;
        routed(g, e) += 1;
        dropped += !keep;
      }
    }
    CHECK(a.at("kept").data == kept);
    CHECK(a.at("routed").data == routed);
    CHECK(dropped > 0);  // the inputs exercise the capacity rule
    fs::remove_all(dir);
  }
}
