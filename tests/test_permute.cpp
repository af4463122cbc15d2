// collectives/permute.cpp on the sim backend: collective_permute and collective_shift against a
// brute force written here (member r of a group gets the block of the member whose target is r,
// found by searching the permutation, and the group's members from the mesh's row-major digits),
// in the three element types, with ledger bytes against the block size and the prediction; the
// cost model's terms for a shift by one on each wiring.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "collectives/permute.hpp"
#include "collectives/predict.hpp"
#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "harness/cost/topology.hpp"

using namespace shardlab;

namespace {

// Device d's block: 10 d + k (k = 0..5), integers exact in bfloat16.
template <class T>
xt::xarray<T> block_of(int d) {
  xt::xarray<T> t = xt::empty<T>(Shape{2, 3});
  for (std::size_t k = 0; k < 6; ++k) t.data()[k] = element_cast<T>(10.0 * d + double(k));
  return t;
}

// On mesh X=2,Y=3 the group over Y of device d is {3x, 3x+1, 3x+2} (x = d / 3); over X it is
// {y, y+3}; over X,Y it is 0..5.
std::vector<int> members(int d, const std::string& axes) {
  if (axes == "Y") return {d / 3 * 3, d / 3 * 3 + 1, d / 3 * 3 + 2};
  if (axes == "X") return {d % 3, d % 3 + 3};
  return {0, 1, 2, 3, 4, 5};
}

template <class T>
void check_permute(DType wire, const std::string& axes_name, const std::vector<int>& perm) {
  const std::vector<std::string> axes = axes_name == "X,Y" ? std::vector<std::string>{"X", "Y"}
                                                          : std::vector<std::string>{axes_name};
  Runtime rt(Backend::sim, false, wire);
  const RunResult r = rt.run(Mesh::parse("X=2,Y=3"), [&](Device& dev) -> Outputs {
    const xt::xarray<T> got = collective_permute(dev, block_of<T>(dev.id()), axes, perm, "A");
    Tensor out = xt::empty<double>(Shape{2, 3});
    for (std::size_t k = 0; k < 6; ++k) out.data()[k] = element_cast<double>(got.data()[k]);
    return {{"A", out}};
  });
  std::size_t moved = 0;
  for (int d = 0; d < 6; ++d) {
    const std::vector<int> m = members(d, axes_name);
    int me = 0;
    while (m[me] != d) ++me;
    int source = -1;
    for (std::size_t s = 0; s < perm.size(); ++s)
      if (perm[s] == me) source = m[s];
    CHECK(r.outputs[d].at("A") == block_of<double>(source));
    moved += perm[me] != me;
  }
  const std::size_t bytes = 6 * element_bytes(wire);
  CHECK(r.ledger.size() == 6);
  std::size_t senders = 0;
  for (const auto& row : r.ledger) {
    CHECK(row.op == "collective_permute");
    CHECK(row.algorithm == "direct");
    CHECK(row.bytes_sent == row.bytes_received);
    CHECK((row.bytes_sent == 0 || row.bytes_sent == bytes));
    CHECK(row.messages == (row.bytes_sent ? 1u : 0u));
    CHECK(predicted_bytes_sent(row.op, row.group_size, row.input_bytes, row.element_bytes) == bytes);
    CHECK(predicted_messages(row.op, row.group_size) == 1);
    senders += row.bytes_sent > 0;
  }
  CHECK(senders == moved);
}

}  // namespace

TEST_SUITE("permute") {

TEST_CASE("permute: shifts and a permutation with a fixed point, over one axis and two, three dtypes") {
  for (DType wire : {DType::float64, DType::float32, DType::bfloat16}) {
    CAPTURE(dtype_name(wire));
    check_permute<double>(wire, "Y", {1, 2, 0});   // shift +1
    check_permute<double>(wire, "Y", {2, 0, 1});   // shift -1
    check_permute<double>(wire, "Y", {0, 2, 1});   // member 0 stays
    check_permute<double>(wire, "X", {1, 0});
    check_permute<double>(wire, "X,Y", {3, 0, 5, 1, 2, 4});
  }
  check_permute<float>(DType::float32, "X,Y", {1, 2, 3, 4, 5, 0});
  check_permute<bfloat16>(DType::bfloat16, "Y", {2, 0, 1});
  check_permute<float>(DType::bfloat16, "Y", {1, 2, 0});
}

TEST_CASE("permute: collective_shift(k) is the permutation r -> r+k, and -k undoes it") {
  CHECK(shift_permutation(4, 1) == std::vector<int>{1, 2, 3, 0});
  CHECK(shift_permutation(4, -1) == std::vector<int>{3, 0, 1, 2});
  CHECK(shift_permutation(4, 6) == std::vector<int>{2, 3, 0, 1});
  Runtime rt(Backend::sim);
  const RunResult r = rt.run(Mesh::parse("X=4"), [](Device& dev) -> Outputs {
    const Tensor a = block_of<double>(dev.id());
    const Tensor once = collective_shift(dev, a, {"X"}, 1, "a");
    const Tensor back = collective_shift(dev, once, {"X"}, -1, "a");
    return {{"once", once}, {"back", back}};
  });
  for (int d = 0; d < 4; ++d) {
    CHECK(r.outputs[d].at("once") == block_of<double>((d + 3) % 4));
    CHECK(r.outputs[d].at("back") == block_of<double>(d));
  }
  CHECK(r.ledger.size() == 8);
}

TEST_CASE("permute: the identity moves nothing and writes no row; a non-permutation is refused") {
  Runtime rt(Backend::sim);
  const RunResult r = rt.run(Mesh::parse("X=3"), [](Device& dev) -> Outputs {
    return {{"a", collective_shift(dev, block_of<double>(dev.id()), {"X"}, 3, "a")}};
  });
  for (int d = 0; d < 3; ++d) CHECK(r.outputs[d].at("a") == block_of<double>(d));
  CHECK(r.ledger.empty());
  for (const std::vector<int>& bad : std::vector<std::vector<int>>{{0, 0, 1}, {1, 2}, {1, 2, 3}}) {
    try {
      rt.run(Mesh::parse("X=3"), [&](Device& dev) -> Outputs {
        return {{"a", collective_permute(dev, block_of<double>(dev.id()), {"X"}, bad, "a")}};
      });
      FAIL("a non-permutation ran");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::unsupported);
      CHECK(std::string(e.what()).find("is not a permutation") != std::string::npos);
    }
  }
}

TEST_CASE("permute: --inject stale-receive leaves the last device its own block") {
  Runtime rt(Backend::sim);
  rt.inject(parse_fault("stale-receive"));
  const RunResult r = rt.run(Mesh::parse("X=4"), [](Device& dev) -> Outputs {
    return {{"a", collective_shift(dev, block_of<double>(dev.id()), {"X"}, 1, "a")}};
  });
  CHECK(rt.struck());
  CHECK(r.outputs[2].at("a") == block_of<double>(1));
  CHECK(r.outputs[3].at("a") == block_of<double>(3));  // not device 2's
}

TEST_CASE("permute: the cost model's shift by one on each wiring") {
  const double n = 1e6;
  const CollectiveTerms sw = collective_terms("collective_permute", Algorithm::pairwise, 8, n);
  CHECK(sw.steps == 1);
  CHECK(sw.link_bytes == n);
  CHECK(sw.reduce_bytes == 0);
  const Hardware& nv = hardware_preset("nvlink-a100");
  CHECK(sw.calls == 1);
  CHECK(topology_seconds("collective_permute", {8}, n, nv) == doctest::Approx(nv.launch + nv.alpha + n / nv.bytes_per_s));
  const Hardware& v5e = hardware_preset("tpu-v5e");  // wraps only on axes of 16
  const TopologyTerms line = topology_terms("collective_permute", {8}, n, v5e);
  CHECK(line.hops == 7);  // device 7's block runs back along the line
  CHECK(line.link_bytes == n);
  const TopologyTerms ring = topology_terms("collective_permute", {16}, n, v5e);
  CHECK(ring.hops == 1);
  CHECK(topology_terms("collective_permute", {4, 16}, n, v5e).hops == 3 + 1);
}

}  // TEST_SUITE
