// collectives/fault.hpp: each planted fault changes what its collective delivers, on the last
// device only and once, with the expected values worked here from the definitions (device d holds
// d + 1 in every element of a 4-element block, so sums and blocks are small integers); perturb
// picks the element nearest the block's RMS; bad kinds are one sentence.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "collectives/collectives.hpp"
#include "collectives/fault.hpp"
#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "core/dtype.hpp"
#include "core/text.hpp"
#include "core/mesh.hpp"

using namespace shardlab;

namespace {

// Runs `op` on mesh X=n with fault `kind`; returns each device's result and whether it struck.
template <class Op>
std::vector<Tensor> run_with(const std::string& kind, int n, const Op& op, bool& struck) {
  Runtime rt(Backend::sim);
  rt.inject(parse_fault(kind));
  const Mesh mesh = Mesh::parse("X=" + std::to_string(n));
  const RunResult r = rt.run(mesh, [&](Device& dev) {
    const Tensor local = xt::ones<double>({std::size_t(4)}) * double(dev.id() + 1);
    return Outputs{{"out", op(dev, local)}};
  });
  struck = rt.struck();
  std::vector<Tensor> out;
  for (const auto& o : r.outputs) out.push_back(o.at("out"));
  return out;
}

}  // namespace

TEST_SUITE("fault") {
  TEST_CASE("parse_fault reads every kind and refuses others in one sentence") {
    for (const auto& k : fault_kinds(1e-3)) CHECK(fault_text(parse_fault(k)) == k);
    CHECK(parse_fault("").kind == FaultKind::none);
    CHECK(parse_fault("perturb:0.5").size == 0.5);
    for (const char* bad : {"perturb", "perturb:", "perturb:0", "perturb:-1", "perturb:nan", "perturb:1x", "skip",
                            "Skip-add"}) {
      CAPTURE(bad);
      CHECK_THROWS_AS(parse_fault(bad), Error);
    }
  }

  TEST_CASE("perturb_block moves the element nearest the RMS by (1 + E), or sets E in a zero block") {
    std::vector<double> v = {0.1, -2.0, 10.0, 0.0};  // RMS = sqrt(104.01 / 4) = 5.1: -2 is nearest
    perturb_block(v.data(), v.size(), 0.5);
    CHECK(v == std::vector<double>{0.1, -3.0, 10.0, 0.0});
    std::vector<double> z(3, 0.0);
    perturb_block(z.data(), z.size(), 0.25);
    CHECK(z[0] == 0.25);
    CHECK(is_bookkeeping("peak_bytes"));
    CHECK(is_bookkeeping("held"));
    CHECK_FALSE(is_bookkeeping("dW_in"));
  }

  TEST_CASE("perturb:E below the element type's epsilon plants nothing, so it is refused") {
    // The element v times (1 + E) is v again below epsilon: the run would PASS over no fault.
    std::vector<float> f = {1.0f, 1.0f};
    perturb_block(f.data(), f.size(), 1e-30);
    CHECK(f[0] == 1.0f);  // planted nothing
    CHECK_THROWS_WITH_AS(refuse_unplantable(parse_fault("perturb:1e-30"), DType::float32),
                         doctest::Contains("plants nothing in float32"), Error);
    CHECK_THROWS_AS(refuse_unplantable(parse_fault("perturb:1e-3"), DType::bfloat16), Error);
    CHECK_THROWS_AS(refuse_unplantable(parse_fault("perturb:1e-17"), DType::float64), Error);
    // At epsilon and above an element always moves by at least one step of its type.
    for (const DType t : {DType::float32, DType::float64, DType::bfloat16}) {
      CAPTURE(dtype_name(t));
      const double e = 2 * unit_roundoff(t);
      CHECK_NOTHROW(refuse_unplantable(parse_fault("perturb:" + format_number(e * 1.0000001, "%.17g")), t));
      CHECK_NOTHROW(refuse_unplantable(parse_fault("skip-add"), t));
    }
    std::vector<bfloat16> b = {bfloat16(1.5f), bfloat16(1.5f)};
    perturb_block(b.data(), b.size(), 2 * unit_roundoff(DType::bfloat16));
    CHECK(float(b[0]) != 1.5f);
    CHECK_THROWS_AS(parse_fault("perturb:0x1p-3"), Error);  // decimal only, as every number
  }

  TEST_CASE("skip-add: the last device's reduction step keeps what it received, once") {
    bool struck = false;
    // all_reduce over 3 devices of 1, 2, 3: 6 everywhere when sound.
    const auto ok = run_with("", 3, [](Device& d, const Tensor& t) { return all_reduce(d, t, {"X"}, "t"); }, struck);
    for (const auto& o : ok) CHECK(o == xt::ones<double>({std::size_t(4)}) * 6.0);
    CHECK_FALSE(struck);
    const auto bad = run_with("skip-add", 3, [](Device& d, const Tensor& t) { return all_reduce(d, t, {"X"}, "t"); }, struck);
    CHECK(struck);
    // Device 2's first step skips adding its own 3 to the chunk it passes on: that chunk's sum
    // misses 3 on every device after the all_gather; the other chunks stay 6.
    int low = 0;
    for (std::size_t i = 0; i < 4; ++i) low += bad[0](i) == 3.0;
    CHECK(low >= 1);
    for (const auto& o : bad)
      for (std::size_t i = 0; i < 4; ++i) CHECK((o(i) == 6.0 || o(i) == 3.0));
  }

  TEST_CASE("gather-offset, stale-receive and swap-blocks change only the last device's result") {
    bool struck = false;
    auto gather = [](Device& d, const Tensor& t) { return all_gather(d, t, {"X"}, 0, "t"); };
    const auto ok = run_with("", 3, gather, struck);
    for (const char* kind : {"gather-offset", "stale-receive"}) {
      CAPTURE(kind);
      const auto bad = run_with(kind, 3, gather, struck);
      CHECK(struck);
      CHECK(bad[0] == ok[0]);
      CHECK(bad[1] == ok[1]);
      CHECK(bad[2] != ok[2]);
    }
    // gather-offset: blocks 0 and 1 trade places: 2 2 2 2 1 1 1 1 3 3 3 3.
    const auto moved = run_with("gather-offset", 3, gather, struck);
    CHECK(moved[2](0) == 2.0);
    CHECK(moved[2](4) == 1.0);
    // all_to_all of [1..] blocks: device 2 sends block j to device j; its own block and the next's
    // (block 0, from device 0) trade places in what it received.
    auto a2a = [](Device& d, const Tensor& t) { return all_to_all(d, t, {"X"}, 0, 0, "t"); };
    const auto good = run_with("", 2, a2a, struck);
    const auto swapped = run_with("swap-blocks", 2, a2a, struck);
    CHECK(struck);
    CHECK(swapped[0] == good[0]);
    CHECK(swapped[1] != good[1]);
    // A kind with no place in the run never strikes.
    run_with("skip-update", 2, gather, struck);
    CHECK_FALSE(struck);
  }

  TEST_CASE("wrong-axis: every device's first collective over X runs over Y, the twin of its size") {
    Runtime rt(Backend::sim);
    rt.inject(parse_fault("wrong-axis"));
    const Mesh mesh = Mesh::parse("X=2,Y=2");  // device d = 2x + y holds d + 1
    const RunResult r = rt.run(mesh, [](Device& dev) {
      const Tensor local = xt::ones<double>({std::size_t(2)}) * double(dev.id() + 1);
      const Tensor first = all_reduce(dev, local, {"X"}, "first"), second = all_reduce(dev, local, {"X"}, "second");
      return Outputs{{"first", first}, {"second", second}};
    });
    CHECK(rt.struck());
    // Over Y: devices {0, 1} sum to 3, {2, 3} to 7; the second call is over X again: {0, 2} 4, {1, 3} 6.
    const double over_y[] = {3, 3, 7, 7}, over_x[] = {4, 6, 4, 6};
    for (int d = 0; d < 4; ++d) {
      CHECK(r.outputs[d].at("first")(0) == over_y[d]);
      CHECK(r.outputs[d].at("second")(0) == over_x[d]);
    }
  }
}
