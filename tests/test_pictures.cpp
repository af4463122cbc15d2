// harness/check/pictures.cpp: each device's box shows its block's index ranges, and the one-line layout
// summary counts distinct blocks and copies. Expected ranges come from the block formula
// (device at coordinates (r, c) of a 2x4 mesh holds rows r*32/2.. and cols c*256/4..).
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "harness/check/pictures.hpp"

using namespace shardlab;

namespace {
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}
std::string range(int lo, int hi) { return std::to_string(lo) + ":" + std::to_string(hi); }
}  // namespace

TEST_CASE("blocks_picture: every device's box, in row-major order along each mesh row") {
  const Mesh mesh = Mesh::parse("X=2,Y=4");
  const Shape shape = {32, 256};
  const std::string pic = blocks_picture(mesh, Spec::parse("X,Y"), shape);
  int rows_seen = 0;
  for (const auto& line : lines_of(pic)) {
    if (line.rfind("X=", 0) != 0) continue;  // the lines holding boxes start with the X coordinate
    const int r = line[2] - '0';
    std::size_t at = 0;
    for (int c = 0; c < 4; ++c) {  // left to right along Y
      const std::string box = "[" + range(r * 16, r * 16 + 16) + ", " + range(c * 64, c * 64 + 64) + "]";
      const std::size_t found = line.find(box, at);
      CHECK_MESSAGE(found != std::string::npos, box << " in: " << line);
      at = found == std::string::npos ? at : found + box.size();
    }
    ++rows_seen;
  }
  CHECK(rows_seen == 2);
}

TEST_CASE("blocks_picture: a replicated tensor shows the whole range on every device") {
  const Mesh mesh = Mesh::parse("X=2,Y=4");
  const std::string pic = blocks_picture(mesh, Spec::parse("_,_"), {32, 256});
  std::size_t count = 0;
  for (std::size_t at = pic.find("[0:32, 0:256]"); at != std::string::npos; at = pic.find("[0:32, 0:256]", at + 1))
    ++count;
  CHECK(count == 8);
}

TEST_CASE("layout_summary counts distinct blocks and the devices holding each") {
  const Mesh mesh = Mesh::parse("X=2,Y=4");
  CHECK(layout_summary(mesh, Spec::parse("X,Y"), {32, 256}, "A", {"I", "J"}) ==
        "A[I_X, J_Y]: 8 distinct blocks of [16, 64], each held by 1 device");
  CHECK(layout_summary(mesh, Spec::parse("X,_"), {32, 256}, "A", {"I", "J"}) ==
        "A[I_X, J]: 2 distinct blocks of [16, 256], each held by 4 devices");
  CHECK(layout_summary(mesh, Spec::parse("_,_"), {32, 256}, "A", {"I", "J"}) ==
        "A[I, J]: 1 distinct block of [32, 256], each held by 8 devices");
  // Partial sums over Y: 4 different partial blocks, each on the 2 devices of one X column.
  CHECK(layout_summary(mesh, Spec::parse("_,_{Y}"), {32, 256}, "C", {"I", "J"}) ==
        "C[I, J]{U_Y}: 4 distinct partial blocks of [32, 256], each held by 2 devices");
}
