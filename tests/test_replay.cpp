// collectives/replay.cpp and Runtime's replay: the collectives recomputed from their definitions
// equal the ring's bit for bit in every element type, even and uneven, over groups of several
// axes; the order they sum in matters (a plain left-to-right sum of the same bfloat16 blocks
// differs), so that equality is a check with power; and every planted fault makes a run differ
// from its replay.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "collectives/collectives.hpp"
#include "collectives/fault.hpp"
#include "collectives/runtime.hpp"
#include "core/dtype.hpp"
#include "core/mesh.hpp"
#include "core/tensor.hpp"

using namespace shardlab;
using Strings = std::vector<std::string>;

namespace {

// Values of many magnitudes (1e-3 to 1e3, both signs): sums of them round differently in
// different orders in every type.
double value(int d, std::size_t i) {
  const double u = std::sin(1.0 + 7.3 * d + 0.917 * static_cast<double>(i));
  return u * std::pow(10.0, static_cast<double>((static_cast<std::size_t>(d) * 5 + i * 3) % 7) - 3.0);
}

template <class T>
xt::xarray<T> block(const Device& dev, const Shape& shape) {
  xt::xarray<T> x = xt::empty<T>(shape);
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<T>(value(dev.id(), i));
  return x;
}

template <class T>
Tensor as_tensor(const xt::xarray<T>& x) {
  Tensor t = xt::empty<double>(x.shape());
  for (std::size_t i = 0; i < x.size(); ++i) t.data()[i] = static_cast<double>(x.data()[i]);
  return t;
}

// Every collective, even and uneven, on blocks of T (the program's type) moved as the runtime's.
template <class T>
Outputs every_collective(Device& dev) {
  const Strings both = {"Y", "X"}, y = {"Y"}, x = {"X"};
  Outputs o;
  o["all_reduce"] = as_tensor(all_reduce(dev, block<T>(dev, {5, 7}), both, "a"));  // 35 over 8: uneven chunks
  o["all_reduce_max"] = as_tensor(all_reduce_max(dev, block<T>(dev, {3, 4}), y, "m"));
  o["reduce_scatter"] = as_tensor(reduce_scatter(dev, block<T>(dev, {3, 8}), y, 1, "r"));
  o["reduce_scatter_v"] = as_tensor(reduce_scatter_v(dev, block<T>(dev, {7, 2}), y, 0, {3, 1, 2, 1}, "rv"));
  o["all_gather"] = as_tensor(all_gather(dev, block<T>(dev, {2, 3}), both, 1, "g"));
  const std::size_t mine = static_cast<std::size_t>(dev.coord("X")) + 1;
  o["all_gather_v"] = as_tensor(all_gather_v(dev, block<T>(dev, {mine, 2}), x, 0, {1, 2}, "gv"));
  o["all_to_all"] = as_tensor(all_to_all(dev, block<T>(dev, {4, 3}), y, 0, 1, "t"));
  o["all_to_all_one_dim"] = as_tensor(all_to_all(dev, block<T>(dev, {8, 3}), y, 0, 0, "t1"));  // split = concat
  o["all_to_all_v"] =
      as_tensor(all_to_all_v(dev, block<T>(dev, {3, mine}), x, 0, 1, {2, 1}, {1, 2}, "tv"));
  return o;
}

const Mesh kMesh({"X", "Y"}, {2, 4});

}  // namespace

TEST_SUITE("replay") {
  TEST_CASE("each collective recomputed from its definition equals the ring's bit for bit, in every type") {
    for (DType t : {DType::float64, DType::float32, DType::bfloat16}) {
      CAPTURE(dtype_name(t));
      for (int held = 0; held < 2; ++held) {  // the program holds the wire type, or float64 moved as it
        CAPTURE(held);
        Runtime rt(Backend::sim, false, t);
        rt.set_replay(true);
        const SpmdProgram p = [&](Device& dev) {
          if (held == 1) return every_collective<double>(dev);
          if (t == DType::float32) return every_collective<float>(dev);
          if (t == DType::bfloat16) return every_collective<bfloat16>(dev);
          return every_collective<double>(dev);
        };
        rt.run(kMesh, p);
        REQUIRE(rt.replays().size() == 1);
        const ReplayRecord& r = rt.replays().back();
        CHECK_MESSAGE(r.identical, r.detail);
        CHECK(r.tensors == 8 * 9);
      }
    }
  }

  TEST_CASE("the order matters: a left-to-right bfloat16 sum of the same blocks differs from the ring's") {
    // If every order gave the same sum, matching the replay would only say the values were moved.
    Runtime rt(Backend::sim, false, DType::bfloat16);
    const RunResult r = rt.run(kMesh, [](Device& dev) {
      return Outputs{{"s", as_tensor(all_reduce(dev, block<bfloat16>(dev, {5, 7}), {"Y", "X"}, "a"))}};
    });
    int differ = 0;
    for (std::size_t i = 0; i < 35; ++i) {
      float plain = 0;
      bool first = true;
      for (int d = 0; d < 8; ++d) {  // group order over (Y, X) is 0, 4, 1, 5, ... ; any fixed order will do
        const float x = static_cast<float>(static_cast<bfloat16>(value(d, i)));
        plain = first ? x : static_cast<float>(bfloat16(plain + x));
        first = false;
      }
      differ += static_cast<double>(plain) != r.outputs[0].at("s").data()[i];
    }
    CHECK(differ >= 3);
  }

  TEST_CASE("every planted fault makes the run differ from its replay, which names where") {
    for (const char* kind : {"perturb:1e-3", "skip-add", "gather-offset", "swap-blocks", "stale-receive"}) {
      CAPTURE(kind);
      Runtime rt(Backend::sim, false, DType::bfloat16);
      rt.inject(parse_fault(kind));
      rt.run(kMesh, every_collective<bfloat16>);
      REQUIRE(rt.struck());
      REQUIRE(rt.replays().size() == 1);
      CHECK_FALSE(rt.replays().back().identical);
      CHECK(rt.replays().back().detail.find("the replay's") != std::string::npos);
    }
  }

  TEST_CASE("a collective over the wrong axis (a twin of the same size) differs from its replay") {
    Runtime rt(Backend::sim, false, DType::bfloat16);
    rt.inject(parse_fault("wrong-axis"));
    rt.run(Mesh({"X", "Y"}, {2, 2}), [](Device& dev) {
      return Outputs{{"s", as_tensor(all_reduce(dev, block<bfloat16>(dev, {3, 3}), {"Y"}, "a"))}};
    });
    REQUIRE(rt.struck());
    REQUIRE(rt.replays().size() == 1);
    CHECK_FALSE(rt.replays().back().identical);
  }

  TEST_CASE("replay is on for bfloat16 only, unless asked, and never with native collectives") {
    CHECK(Runtime(Backend::sim, false, DType::bfloat16).replaying());
    CHECK_FALSE(Runtime(Backend::sim, false, DType::float32).replaying());
    Runtime off(Backend::sim, false, DType::bfloat16);
    off.set_replay(false);
    off.run(kMesh, every_collective<bfloat16>);
    CHECK(off.replays().empty());
  }
}
