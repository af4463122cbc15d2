// lessons/*.cpp on meshes other than their defaults: each lesson on the meshes of its own rank with
// one axis of one device, and with 8 devices on one axis. A mesh a lesson takes must run to its
// PASS line (exit 0) with every stdout line at most 100 columns: a picture of 8 boxes in a row
// must wrap, and a one-device axis, over which nothing moves, must not fail a check that counts
// collectives. A mesh a lesson does not take (wrong rank, a dim that does not divide) must be
// refused with exit 2 and one line on stderr, not a crash. The default meshes of 12, 13 and 18,
// the slowest, are left to test_lesson_commands, which runs every lesson as it stands.
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "tests/run_binary.hpp"
#include "tests/sanitized.hpp"

using shardlab::testing::run_binary;

namespace {

struct LessonMeshes {
  const char* lesson;
  const char* args;                 // after --mesh: small sizes, where a lesson takes them
  std::vector<const char*> runs;    // meshes the lesson takes
  std::vector<const char*> refuses; // meshes it refuses in one sentence
};

// Two-axis lessons: the default X=2,Y=4, each axis alone of size 1, and 8 devices along either.
const std::vector<const char*> kTwoAxes = {"X=2,Y=4", "X=1,Y=4", "X=2,Y=1", "X=1,Y=8", "X=8,Y=1"};

const std::vector<LessonMeshes> kLessons = {
    {"01_mesh_and_layout", "",
     {"mesh_rows=2,mesh_cols=4", "mesh_rows=1,mesh_cols=4", "mesh_rows=2,mesh_cols=1", "mesh_rows=1,mesh_cols=8",
      "mesh_rows=8,mesh_cols=1", "X=8", "X=1"},
     {}},
    {"02_reduction_allreduce", "",
     {"mesh_rows=2,mesh_cols=4", "mesh_rows=1,mesh_cols=4", "mesh_rows=2,mesh_cols=1", "mesh_rows=1,mesh_cols=8",
      "mesh_rows=8,mesh_cols=1"},
     {"X=8"}},  // its mapping names the axes mesh_rows and mesh_cols
    {"03_dot_product_and_matmul", "", {"X=2,Y=4", "X=1,Y=4", "X=2,Y=1", "X=1,Y=8", "X=1"}, {"X=8,Y=1"}},
    {"04_inner_axes_match", "", kTwoAxes, {"X=8"}},
    {"05_inner_axes_mismatch", "", kTwoAxes, {"X=8"}},
    {"06_outer_axes", "--shape 8,16,8", kTwoAxes, {"X=8"}},
    {"07_full_sharding", "--shape 8,16,8", kTwoAxes, {"X=8"}},
    {"08_gspmd_ffn", "", kTwoAxes, {"Y=8"}},
    {"09_column_row_pairwise", "", {"Y=4", "Y=1", "Y=8"}, {"X=2,Y=4"}},
    {"10_pairwise_backward", "", {"Y=4", "Y=1", "Y=8"}, {"X=2,Y=4"}},
    {"11_propagation", "", kTwoAxes, {"Y=8"}},
    {"12_attention", "", {"X=1,Y=4", "X=2,Y=1", "X=1,Y=8", "X=1,Y=1"}, {"X=8,Y=1", "Y=4"}},
    {"13_transformer_layer", "", {"X=1,Y=4", "X=2,Y=1", "X=1,Y=8", "X=1,Y=1"}, {"X=8,Y=1", "Y=4"}},
    {"14_data_parallel", "", {"X=8", "X=1", "X=1,Y=8", "X=8,Y=1"}, {}},
    {"15_zero", "", {"X=3", "X=8"}, {"X=2,Y=4", "X=1"}},  // one device: nothing to shard
    {"16_pipeline", "", {"X=4"}, {"X=1", "X=8"}},
    {"17_3d_parallelism", "",
     {"D=2,P=2,T=2", "D=1,P=2,T=2", "D=2,P=1,T=2", "D=2,P=2,T=1", "D=8,P=1,T=1", "D=1,P=8,T=1", "D=1,P=1,T=8"},
     {"X=8"}},
    {"18_sequence_parallel", "", {"Y=1", "Y=8"}, {"X=2,Y=4"}},
    {"19_context_parallel", "", {"X=4", "X=8"}, {"X=1"}},  // a ring needs 2 devices
    {"20_expert_parallel", "", {"X=2,Y=2", "X=1,Y=2", "X=2,Y=1", "X=1,Y=1", "X=1,Y=8", "X=8,Y=1", "X=8", "X=1"}, {}},
    {"21_planning_a_model", "", {"D=2,P=2,T=2"}, {"X=8", "D=2,P=1,T=2"}},  // the miniature's own mesh
};

// The first stdout line wider than 100 columns, with its number; "" if none.
std::string too_wide(const std::string& out) {
  std::istringstream in(out);
  int n = 0;
  for (std::string line; std::getline(in, line);)
    if (++n, line.size() > 100) return "line " + std::to_string(n) + " (" + std::to_string(line.size()) + "): " + line;
  return "";
}

std::string command(const LessonMeshes& l, const char* mesh) {
  return std::string(l.lesson) + " --mesh " + mesh + (*l.args ? " " : "") + l.args;
}

}  // namespace

TEST_SUITE("lessons") {
  TEST_CASE("every lesson runs on one-device axes and 8 devices on one axis, within 100 columns") {
    // Under a sanitizer (tests/sanitized.hpp) one mesh of each kind a lesson: its second run (a
    // one-device axis, mostly; the first is often the default) and its first refusal.
    const bool all = !shardlab::testing::kSanitized;
    for (const auto& l : kLessons) {
      for (const char* mesh : l.runs) {
        if (!all && mesh != l.runs[std::min<std::size_t>(1, l.runs.size() - 1)]) continue;
        const std::string cmd = command(l, mesh);
        CAPTURE(cmd);
        const auto r = run_binary(cmd);
        CHECK_MESSAGE(r.status == 0, r.err);
        CHECK(r.out.find("PASS " + std::string(l.lesson) + ":") != std::string::npos);
        CHECK(too_wide(r.out) == "");
      }
      for (const char* mesh : l.refuses) {
        if (!all && mesh != l.refuses.front()) continue;
        const std::string cmd = command(l, mesh);
        CAPTURE(cmd);
        const auto r = run_binary(cmd);
        CHECK(r.status == 2);
        CHECK(r.err.rfind("error: ", 0) == 0);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        CHECK(too_wide(r.out) == "");
      }
    }
  }
}
