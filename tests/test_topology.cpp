// The wiring model (harness/cost/topology.hpp) against the JAX scaling book's worked collective times
// ("How To Scale Your Model", jax-ml/scaling-book: part 3, "Sharded Matrices and How to Multiply
// Them", sharding.md; TPU figures from part 2, tpus.md) and against routing done by brute force.
//
// Where the numbers differ, the test says why. Two differences recur:
//  - the book rounds (P-1)/P to 1 (an AllGather "takes V / W"); the model keeps it, because only
//    (P-1)/P of the array has to arrive at a device;
//  - the book takes the larger of the latency and the bandwidth terms; alpha-beta adds them.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "harness/cost/cost.hpp"
#include "harness/cost/topology.hpp"
#include "tests/toy_hardware.hpp"

using namespace shardlab;

namespace {

const double kOneWay = 4.5e10;  // part 2: ICI bytes/s per link one way on TPU v4p and v5e
const double kBf16 = 2;

// A preset without a reduction term, for the book's numbers (it leaves the reduction out).
Hardware no_reduce(Hardware h) {
  h.reduce_bytes_per_s = INFINITY;
  return h;
}

}  // namespace

TEST_CASE("scaling book, pop quiz 2: AllGather_Y [E_Y, F] -> [E, F] on TPU v5e, mesh X=8,Y=4") {
  const Hardware& v5e = hardware_preset("tpu-v5e");
  REQUIRE(v5e.topology == Topology::torus);
  REQUIRE(v5e.bytes_per_s == kOneWay);
  // (a) E=2048, F=8192 in bf16: a 34 MB array. An axis of 4 has no wraparound on a v5e (only 16
  // does), so the edge shards make 3 hops one way: the book gives 3 * 8.4e6 / 4.5e10 = 560 us.
  const double n = 2048.0 * 8192 * kBf16;
  const double book_line = 3 * (n / 4) / kOneWay;
  CHECK(book_line * 1e6 == doctest::Approx(560).epsilon(0.005));
  CHECK(topology_seconds("all_gather", {4}, n, v5e) == doctest::Approx(book_line + 3 * 1e-6));
  // With a wraparound the book's first estimate is V / W_bidi = 34e6 / 9e10 = 377 us; the model
  // sends (P-1)/P of that and adds ceil(4/2) = 2 hops.
  Hardware wrapped = v5e;
  wrapped.wrap_from = 0;
  const double book_bidi = n / (2 * kOneWay);
  CHECK(book_bidi * 1e6 == doctest::Approx(377).epsilon(0.02));
  CHECK(topology_seconds("all_gather", {4}, n, wrapped) == doctest::Approx(book_bidi * 3 / 4 + 2e-6));
  // (b) E=F=256: 32 kB per shard, 0.7 us a hop: latency bound, 3 hops of ~1 us = 3 us in the book
  // (its profile shows ~8 us). The model adds the two terms: 3 us + 3 x 0.73 us.
  const double small = 256.0 * 256 * kBf16;
  const double book_small = std::max(3 * 1e-6, 3 * (small / 4) / kOneWay);
  CHECK(book_small == doctest::Approx(3e-6));
  const double ours = topology_seconds("all_gather", {4}, small, v5e);
  CHECK(ours == doctest::Approx(3e-6 + 3 * (small / 4) / kOneWay));
  CHECK(ours > book_small);
  CHECK(ours < 8e-6);  // below the profiled time
}

TEST_CASE("scaling book, question 2: TPU v4p 4x4x4, B=1024, D=4096 in bf16") {
  const Hardware v4 = no_reduce(hardware_preset("tpu-v4"));
  REQUIRE(v4.topology == Topology::torus);
  REQUIRE(v4.bytes_per_s == kOneWay);  // the book's 9e10 B/s is both directions of a link
  const double B = 1024, D = 4096;
  // A full 4x4x4 cube wraps on every axis.
  // (1) AllGather_X [B_X, D_Y]: the book's 2BD / (9e10 Y) = 23 us; the model sends 3/4 of it and
  // adds 2 hops.
  const double book1 = 2 * B * D / (9e10 * 4);
  CHECK(book1 * 1e6 == doctest::Approx(23).epsilon(0.02));
  const double n1 = B * D / 4 * kBf16;  // the gathered [B, D_Y]
  CHECK(topology_seconds("all_gather", {4}, n1, v4) == doctest::Approx(book1 * 3 / 4 + 2e-6));
  // (2) AllGather_XY [B_X, D_Y]: two axes, twice the links: the book's 2BD / (2 * 9e10) = 46 us;
  // the model sends 15/16 of it and adds 2 + 2 hops.
  const double book2 = 2 * B * D / (2 * 9e10);
  CHECK(book2 * 1e6 == doctest::Approx(46).epsilon(0.02));
  CHECK(topology_seconds("all_gather", {4, 4}, B * D * kBf16, v4) == doctest::Approx(book2 * 15 / 16 + 4e-6));
  // (3) AllReduce_Z [B_X, D_Y]{U_Z}: the book answers 4BD / W = 190 us, the AllReduce of the whole
  // B x D array. Each device holds only [B_X, D_Y], 1/16 of it, and that is what the AllReduce
  // moves: twice an AllGather of 2BD/16 bytes over one wrapped axis, 4 hops: 11.6 us x 3/4 + 4 us.
  const double shard = 2 * B * D / 16;
  CHECK(4 * B * D / 9e10 * 1e6 == doctest::Approx(186).epsilon(0.01));
  CHECK(topology_seconds("all_reduce", {4}, shard, v4) == doctest::Approx(2 * shard / 9e10 * 3 / 4 + 4e-6));
}

TEST_CASE("scaling book, question 3: a latency-bound AllGather_X [B_X], B=128 in bf16 on TPU v4p") {
  // 256 bytes in all; with the wraparound each shard goes half each way: 2 hops, "roughly 2us".
  const Hardware& v4 = hardware_preset("tpu-v4");
  const double t = topology_seconds("all_gather", {4}, 128 * kBf16, v4);
  CHECK(t == doctest::Approx(2e-6).epsilon(0.01));
  CHECK(topology_terms("all_gather", {4}, 256, v4).hops == 2);
}

TEST_CASE("scaling book, question 10: AllToAll is half an AllGather on a one-way ring, a quarter on a torus") {
  Hardware ring = testing::toy_hardware();
  ring.topology = Topology::one_way_ring;
  Hardware torus = testing::toy_hardware();
  torus.topology = Topology::torus;
  const double N = 64, elem = 4;
  for (int d : {2, 4, 8, 16}) {
    CAPTURE(d);
    const double whole = N * N * elem, local = whole / d;
    // One-way ring: an AllGather puts N^2 (D-1)/D scalars on each link, an AllToAll N^2 (D-1)/(2D).
    CHECK(topology_terms("all_gather", {d}, whole, ring).link_bytes == doctest::Approx(whole * (d - 1) / d));
    CHECK(topology_terms("all_to_all", {d}, local, ring).link_bytes == doctest::Approx(whole * (d - 1) / (2 * d)));
    // Bidirectional ring: blocks travel at most D/2 either way; a link carries D^2/8 blocks of
    // N^2/D^2, i.e. N^2/8, against the AllGather's N^2 (D-1)/(2D): the book's factor 4 as D grows.
    const double a2a = topology_terms("all_to_all", {d}, local, torus).link_bytes;
    const double ag = topology_terms("all_gather", {d}, whole, torus).link_bytes;
    CHECK(a2a == doctest::Approx(whole / 8));
    CHECK(ag / a2a == doctest::Approx(4.0 * (d - 1) / d));
  }
  // A switch gives every pair its own path: the AllToAll sends (P-1)/P of the buffer per port.
  Hardware sw = testing::toy_hardware();
  CHECK(topology_terms("all_to_all", {8}, 800, sw).link_bytes == doctest::Approx(700));
}

TEST_CASE("torus AllToAll: the bisection price matches shortest-path routing done by brute force") {
  // One axis of p devices as a ring (wraps) or a line: route every block of n/p on a shortest path
  // (a tie on a ring splits the block between the two ways) and take the busiest link.
  for (bool wrap : {true, false})
    for (int p = 2; p <= 9; ++p) {
      CAPTURE(wrap);
      CAPTURE(p);
      std::vector<double> right(p, 0), left(p, 0);  // link i -> i+1 and i+1 -> i, in blocks
      for (int s = 0; s < p; ++s)
        for (int t = 0; t < p; ++t) {
          if (s == t) continue;
          auto walk = [&](int dir, double share) {
            for (int at = s; at != t; at = (at + dir + p) % p) (dir > 0 ? right[at] : left[(at - 1 + p) % p]) += share;
          };
          if (!wrap) {
            walk(t > s ? 1 : -1, 1);
            continue;
          }
          const int fwd = (t - s + p) % p, back = p - fwd;
          if (fwd < back) walk(1, 1);
          if (back < fwd) walk(-1, 1);
          if (fwd == back) {
            walk(1, 0.5);
            walk(-1, 0.5);
          }
        }
      double busiest = 0;
      for (int i = 0; i < p; ++i) busiest = std::max({busiest, right[i], left[i]});
      Hardware h = testing::toy_hardware();
      h.topology = Topology::torus;
      h.wrap_from = wrap ? 0 : 1000;
      const double n = 1e6;
      CHECK(topology_terms("all_to_all", {p}, n, h).link_bytes == doctest::Approx(busiest * n / p));
    }
}

TEST_CASE("topology: a switch prices like the ring algorithms; size-1 axes and unknown ops") {
  const Hardware h = testing::toy_hardware();
  for (const char* op : {"all_gather", "reduce_scatter", "all_reduce"})
    CHECK(topology_seconds(op, {2, 4}, 4e6, h) == doctest::Approx(collective_seconds(op, Algorithm::ring, 8, 4e6, h)));
  CHECK(topology_seconds("all_to_all", {8}, 4e6, h) ==
        doctest::Approx(collective_seconds("all_to_all", Algorithm::pairwise, 8, 4e6, h)));
  Hardware t = h;
  t.topology = Topology::torus;
  CHECK(topology_seconds("all_reduce", {1, 4, 1}, 4e6, t) == topology_seconds("all_reduce", {4}, 4e6, t));
  CHECK(topology_seconds("all_reduce", {1}, 4e6, t) == 0);
  CHECK_THROWS_AS(topology_seconds("broadcast", {4}, 4e6, t), Error);
  CHECK(topology_text(hardware_preset("tpu-v5e")) == "2D torus, wraps on axes >= 16");
  CHECK(topology_text(hardware_preset("nvlink-a100")) == "switch");
}
