// The cost model against numbers worked out by hand.
#include <doctest/doctest.h>

#include "core/error.hpp"
#include "harness/cost.hpp"

using namespace shardlab;

namespace {
// Round numbers so the hand arithmetic is easy: alpha 1 us, 1 GB/s links, reduction 2 GB/s.
Hardware toy() {
  Hardware h;
  h.name = "toy";
  h.alpha = 1e-6;
  h.bytes_per_s = 1e9;
  h.reduce_bytes_per_s = 2e9;
  h.flops_per_s = 1e12;
  return h;
}
}  // namespace

TEST_CASE("ring collectives: alpha-beta-gamma by hand") {
  const Hardware h = toy();
  // p = 4, n = 4 MB: each device moves 3 MB.  3 steps * 1 us + 3e6 B / 1e9 B/s = 3.003 ms
  CHECK(collective_seconds("all_gather", Algorithm::ring, 4, 4e6, h) == doctest::Approx(3e-6 + 3e-3));
  // reduce_scatter also reduces the 3 MB it receives at 2 GB/s: + 1.5 ms
  CHECK(collective_seconds("reduce_scatter", Algorithm::ring, 4, 4e6, h) == doctest::Approx(3e-6 + 3e-3 + 1.5e-3));
  // all_reduce: 6 steps, 6 MB over the link, 3 MB reduced
  CHECK(collective_seconds("all_reduce", Algorithm::ring, 4, 4e6, h) == doctest::Approx(6e-6 + 6e-3 + 1.5e-3));
  // all_reduce = reduce_scatter + all_gather
  CHECK(collective_seconds("all_reduce", Algorithm::ring, 8, 1e6, h) ==
        doctest::Approx(collective_seconds("reduce_scatter", Algorithm::ring, 8, 1e6, h) +
                        collective_seconds("all_gather", Algorithm::ring, 8, 1e6, h)));
  CHECK(collective_seconds("all_to_all", Algorithm::pairwise, 2, 2e6, h) == doctest::Approx(1e-6 + 1e-3));
  CHECK(collective_seconds("all_reduce", Algorithm::ring, 1, 4e6, h) == 0.0);
}

TEST_CASE("recursive doubling wins for small messages and loses for large ones") {
  const Hardware h = toy();
  // p = 8: 3 steps. all_reduce moves n*log2(p) = 3n bytes instead of 2n(p-1)/p = 1.75n.
  CHECK(collective_seconds("all_reduce", Algorithm::recursive_doubling, 8, 8e6, h) ==
        doctest::Approx(3e-6 + 3 * 8e6 * (1e-9 + 0.5e-9)));
  CHECK(collective_seconds("all_reduce", Algorithm::recursive_doubling, 8, 64, h) <
        collective_seconds("all_reduce", Algorithm::ring, 8, 64, h));
  CHECK(collective_seconds("all_reduce", Algorithm::recursive_doubling, 8, 64e6, h) >
        collective_seconds("all_reduce", Algorithm::ring, 8, 64e6, h));
  CHECK(collective_steps("all_gather", Algorithm::recursive_doubling, 16) == 4);
  CHECK_THROWS_AS(collective_seconds("all_gather", Algorithm::recursive_doubling, 6, 1e6, h), Error);
}

TEST_CASE("the article's TPUv2-8 by hand: AllGather of x over Y=4 in float32") {
  // x[8,512,5120] split X,_,Y on 2x4: gathered over Y the block is [4,512,5120] = 10485760 floats
  // = 41943040 B; a ring of 4 sends 3/4 of it in 3 steps over 62 GB/s links with 1 us per step.
  const Hardware& h = hardware_preset("tpu-v2");
  CHECK(collective_seconds("all_gather", Algorithm::ring, 4, 41943040.0, h) ==
        doctest::Approx(3e-6 + 41943040.0 * 0.75 / 62e9));
  // One local product of that block with a gathered W_in block [5120,5120]: 2*2048*5120*5120 FLOPs.
  CHECK(compute_seconds(2.0 * 2048 * 5120 * 5120, h) == doctest::Approx(1.07374e11 / 22.5e12));
}

TEST_CASE("presets: every preset is complete and names its source") {
  CHECK(hardware_presets().size() >= 4);
  for (const auto& h : hardware_presets()) {
    CAPTURE(h.name);
    CHECK(h.alpha > 0);
    CHECK(h.bytes_per_s > 0);
    CHECK(h.reduce_bytes_per_s > 0);
    CHECK(h.flops_per_s > 0);
    CHECK(!h.source.empty());
  }
  CHECK(hardware_preset("nvlink-a100").bytes_per_s == 300e9);
  // Accelerators model the article's float32 data; this machine moves shardlab's float64.
  for (const char* name : {"tpu-v2", "tpu-v4", "nvlink-a100", "ethernet-100g"})
    CHECK(hardware_preset(name).element_bytes == 4);
  CHECK(hardware_preset("this-machine").element_bytes == 8);
  // The measured preset says how and when it was measured, not a placeholder.
  const std::string src = hardware_preset("this-machine").source;
  CHECK(src.find("PLACEHOLDER") == std::string::npos);
  CHECK(src.find("mpiexec -n 2") != std::string::npos);
  CHECK(src.find("sweep --what machine") != std::string::npos);
  CHECK(compute_seconds(312e12, hardware_preset("nvlink-a100")) == doctest::Approx(1.0));
  try {
    hardware_preset("tpu-v9");
    FAIL("unknown preset accepted");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::parse);
    CHECK(std::string(e.what()).find("tpu-v4") != std::string::npos);
  }
}
