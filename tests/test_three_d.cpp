// harness/models/three_d: how lesson 17 cuts a stage's weights, against torch.chunk's rule
// written here apart. The lesson's program and its check both slice with three_d_cut, so a cut that
// left a gap or an overlap would be shared by both and pass; this test is the check of its own.
#include <doctest/doctest.h>

#include <string>

#include "harness/models/three_d.hpp"

using namespace shardlab;

namespace {
// torch.chunk(rows, parts)'s block `i`: blocks of ceil(rows / parts), the last ones shorter or empty.
std::pair<std::size_t, std::size_t> chunk_block(std::size_t rows, std::size_t parts, std::size_t i) {
  const std::size_t size = (rows + parts - 1) / parts;
  const std::size_t lo = std::min(i * size, rows), hi = std::min((i + 1) * size, rows);
  return {lo, hi};
}
}  // namespace

TEST_SUITE("three_d") {
  TEST_CASE("three_d_cut tiles hidden over T and each shard's rows over D exactly once, as torch.chunk does") {
    int configs = 0;
    for (const Uneven uneven : {Uneven::chunk, Uneven::pad})
      for (std::size_t hidden : {16u, 7u, 30u, 5u})
        for (std::size_t width : {8u, 5u, 9u})
          for (int T : {1, 2, 3, 5})
            for (int D : {1, 2, 3}) {
              ThreeDConfig c;
              c.tensor = T;
              c.data = D;
              c.hidden = hidden;
              c.width = width;
              c.uneven = uneven;
              CAPTURE(hidden);
              CAPTURE(width);
              CAPTURE(T);
              CAPTURE(D);
              CAPTURE(uneven == Uneven::pad ? "pad" : "chunk");
              const std::size_t block = (hidden + T - 1) / T;  // the longest hidden block
              std::size_t covered = 0;
              for (int t = 0; t < T; ++t) {
                const ThreeDCut cut = three_d_cut(c, 0, t);
                const auto [lo, hi] = chunk_block(hidden, std::size_t(T), std::size_t(t));
                CHECK(cut.h0 == lo);
                CHECK(cut.h1 == hi);
                CHECK(cut.h0 == covered);  // no gap, no overlap, in order
                covered = cut.h1;
                // pad stores every block at the longest; chunk stores its own rows.
                CHECK(cut.hidden == (uneven == Uneven::pad ? block : hi - lo));
                for (int d = 0; d < D; ++d) {
                  const ThreeDCut at = three_d_cut(c, d, t);
                  CHECK(at.h0 == cut.h0);  // the hidden cut does not depend on d
                  // W1's rows (width) and W2's rows (the stored hidden block) over D.
                  const auto [w_lo, w_hi] = chunk_block(width, std::size_t(D), std::size_t(d));
                  CHECK(at.w1_rows.at[d] == w_lo);
                  CHECK(at.w1_rows.counts[d] == w_hi - w_lo);
                  const auto [s_lo, s_hi] = chunk_block(cut.hidden, std::size_t(D), std::size_t(d));
                  CHECK(at.w2_rows.at[d] == s_lo);
                  CHECK(at.w2_rows.counts[d] == s_hi - s_lo);
                  // What device d stores of each: its rows, or under pad the longest block.
                  const std::size_t w_block = (width + D - 1) / D, s_block = (cut.hidden + D - 1) / D;
                  CHECK(at.w1_rows.stored == (uneven == Uneven::pad ? w_block : w_hi - w_lo));
                  CHECK(at.w2_rows.stored == (uneven == Uneven::pad ? s_block : s_hi - s_lo));
                }
              }
              CHECK(covered == hidden);
              ++configs;
            }
    CHECK(configs == 2 * 4 * 3 * 4 * 3);
  }
}
