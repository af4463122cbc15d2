// Issue 18, learner reports: lesson 03 says devices repeat work only when they do; lessons 08, 09
// and 10 refuse a mesh they cannot use in one sentence of the learner's terms; lesson 09's help and report
// name tensors x, W_in, W_out, h, y (never like a mesh axis X or Y); every run on devices says,
// once, beside its verdict, where it ran (MPI processes or threads of one process; the MPI side is
// in tests/mpi/test_mpi_binaries.cpp).
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <regex>
#include <sstream>

#include "tests/run_binary.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::flat;
using shardlab::testing::run_binary;

namespace {
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

int count_of(const std::string& text, const std::string& part) {
  int n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

int widest_line(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  int widest = 0;
  while (std::getline(in, line)) widest = std::max(widest, static_cast<int>(line.size()));
  return widest;
}

const char* const kAllLessons[] = {"01_mesh_and_layout", "02_reduction_allreduce", "03_dot_product_and_matmul",
                                   "04_inner_axes_match", "05_inner_axes_mismatch", "06_outer_axes",
                                   "07_full_sharding", "08_gspmd_ffn", "09_column_row_pairwise",
                                   "10_pairwise_backward", "11_propagation", "12_attention",
                                   "13_transformer_layer", "14_data_parallel", "15_zero", "16_pipeline",
                                   "17_3d_parallelism", "18_sequence_parallel", "19_context_parallel", "20_expert_parallel"};

// The line a sim run prints just before its verdict, for a mesh of `devices`.
std::string sim_line(int devices) {
  return "\nran on a simulated mesh: " + std::to_string(devices) +
         (devices == 1 ? " device as a thread" : " devices as threads") + " of one process\n";
}
}  // namespace

TEST_SUITE("lessons") {
  TEST_CASE("lesson 03: devices repeat the dot product's work only where an axis splits neither vector") {
    const std::string repeat = "repeat the work";
    // A line: every device holds its own run of a and b.
    for (const char* mesh : {"X=4", "X=2", "X=2,Y=1"}) {
      const std::string shown = mesh;
      CAPTURE(shown);
      auto r = run_binary(std::string("03_dot_product_and_matmul --mesh ") + mesh);
      REQUIRE(r.status == 0);
      CHECK_FALSE(has(r.out, repeat));
      CHECK(has(flat(r.out), "Each device holds a different run, so no work is repeated."));
    }
    // A grid: the devices along Y hold the X row's run.
    auto grid = run_binary("03_dot_product_and_matmul");
    REQUIRE(grid.status == 0);
    CHECK(has(flat(grid.out), "Devices with the same X coordinate hold the same run and repeat the work, since "
                              "nothing splits a or b over Y."));
    CHECK_FALSE(has(grid.out, "no work is repeated"));
    auto three = run_binary("03_dot_product_and_matmul --mesh X=2,Y=2,Z=2");
    CHECK(has(flat(three.out), "since nothing splits a or b over Y or Z."));
    // X of size 1: one run of all 4 terms, nothing to add; the Y devices all repeat it.
    auto x1 = run_binary("03_dot_product_and_matmul --mesh X=1,Y=2");
    REQUIRE(x1.status == 0);
    CHECK(has(flat(x1.out), "has nothing to add: nothing travels. Both devices hold the whole vectors and repeat "
                            "the same work"));
    auto one = run_binary("03_dot_product_and_matmul --mesh X=1");
    REQUIRE(one.status == 0);
    CHECK_FALSE(has(one.out, "repeat"));
    CHECK(has(flat(one.out), "The one device does all the work."));
    CHECK(has(one.out, "Mesh X=1 (1 device):"));
  }

  TEST_CASE("lesson 09: a mesh or dims it cannot cut (--uneven none) is one sentence naming the option, exit 2, no stdout") {
    const struct { const char* args; const char* says; } bad[] = {
        {"--mesh 2x4", "error: --mesh 2x4 has 2 axes; lesson 09 cuts weights over one line of devices: "
                       "try --mesh Y=8\n"},
        {"--mesh X=2,Y=4", "error: --mesh X=2,Y=4 has 2 axes;"},
        {"--mesh 1x4", "error: --mesh 1x4 has 2 axes; lesson 09 cuts weights over one line of devices: "
                       "try --mesh Y=4\n"},
        {"--mesh Y=3 --uneven none", "error: --mesh Y=3 cannot split M=16 or H=64 into 3 equal slices, one per device; "
                       "try --mesh Y=4\n"},
        {"--mesh Y=32 --uneven none", "error: --mesh Y=32 cannot split M=16 into 32 equal slices, one per device; try --mesh Y=16\n"},
        {"--dims M=6 --uneven none", "error: --dims M=6: M=6 does not split into 4 equal slices, one per device of mesh Y=4; "
                       "try M=8\n"},
        {"--dims H=30 --mesh Y=4 --uneven none", "error: --dims H=30: H=30 does not split into 4 equal slices"},
    };
    for (const auto& b : bad) {
      const std::string args = b.args;
      CAPTURE(args);
      auto r = run_binary(std::string("09_column_row_pairwise ") + b.args);
      CHECK(r.status == 2);
      CHECK(r.out.empty());
      CHECK(count_lines(r.err) == 1);
      CHECK(r.err.rfind(b.says, 0) == 0);
      CHECK_FALSE(has(r.err, "strategy"));  // the planner's word, not the learner's
      CHECK(widest_line(r.err) <= 100);
    }
    // Meshes it can use, including a line named X and a line of 1.
    for (const char* good : {"--mesh 4 --quiet", "--mesh X=4 --quiet", "--mesh Y=1 --quiet", "--mesh Y=16 --quiet"}) {
      const std::string shown = good;
      CAPTURE(shown);
      auto r = run_binary(std::string("09_column_row_pairwise ") + good);
      CHECK(r.status == 0);
      CHECK(r.out.rfind("PASS", 0) == 0);
    }
    auto one = run_binary("09_column_row_pairwise --mesh Y=1");
    CHECK(has(one.out, "a line of 1 device.\n"));
    CHECK_FALSE(has(one.out, "against 0"));
  }

  TEST_CASE("lessons 08 and 10: a mesh they cannot use is one sentence naming the option, exit 2") {
    const struct { const char* cmd; const char* says; } bad[] = {
        {"10_pairwise_backward --mesh 2x4", "error: --mesh 2x4 has 2 axes; lesson 10 cuts weights over one line"},
        {"10_pairwise_backward --mesh Y=3 --uneven none", "error: --mesh Y=3 cannot split M=16 or H=64 into 3 equal slices"},
        {"10_pairwise_backward --dims H=30 --uneven none", "error: --dims H=30: H=30 does not split into 4 equal slices"},
        {"08_gspmd_ffn --mesh Y=4", "error: --mesh Y=4 has 1 axis; lesson 08 splits the batch over one mesh axis"},
        {"08_gspmd_ffn --mesh 2x2x2", "error: --mesh 2x2x2 has 3 axes; lesson 08"},
    };
    for (const auto& b : bad) {
      const std::string cmd = b.cmd;
      CAPTURE(cmd);
      auto r = run_binary(cmd);
      CHECK(r.status == 2);
      CHECK(r.out.empty());
      CHECK(count_lines(r.err) == 1);
      CHECK(r.err.rfind(b.says, 0) == 0);
      CHECK_FALSE(has(r.err, "strategy"));
    }
  }

  TEST_CASE("lesson 09: help and report name the tensors x, W_in, W_out, h, y as printed, none like an axis") {
    auto help = run_binary("09_column_row_pairwise --help");
    REQUIRE(help.status == 0);
    CHECK(has(flat(help.out), "x is [B, S, M] (B*S tokens of M features), W_in is [M, H] and W_out is [H, M]"));
    CHECK(widest_line(help.out.substr(help.out.find("--dims"))) <= 100);
    auto r = run_binary("09_column_row_pairwise");
    REQUIRE(r.status == 0);
    for (const char* s : {"x[B, S, M]", "x[B, S, M_Y]", "W_in[M, H_Y]", "W_in[M_Y, H]", "all_gather h",
                          "all_reduce h + all_gather y", "h = x W_in and y = gelu(h) W_out"})
      CHECK_MESSAGE(has(r.out, s), s);
    for (const std::string& text : {help.out, r.out}) {
      // No tensor X[..], Y[..], A[..], B[..], no XA, no dX/dY: capitals name mesh axes and dims.
      CHECK_FALSE(std::regex_search(text, std::regex(R"((^|[^A-Za-z_])(X|Y|A|B|XA|dX|dY)\[)")));
      CHECK_FALSE(std::regex_search(text, std::regex(R"(\b(XA|dX|dY)\b)")));
      CHECK_FALSE(has(text, "X is"));
      CHECK(widest_line(text.substr(text.find("--dims") == std::string::npos ? 0 : text.find("--dims"))) <= 100);
    }
    auto j = nlohmann::json::parse(run_binary("09_column_row_pairwise --json").out);
    for (const auto& c : j["collectives"]) {
      const std::string t = c["tensor"];
      CHECK((t == "h" || t == "y"));
    }
  }

  TEST_CASE("every lesson and device-running command says once, beside its verdict, that it ran on a simulated mesh") {
    for (const char* lesson : kAllLessons) {
      const std::string shown = lesson;
      CAPTURE(shown);
      auto j = nlohmann::json::parse(run_binary(std::string(lesson) + " --json").out);
      int devices = 1;
      for (const auto& [axis, size] : j["mesh"].items()) devices *= size.get<int>();
      auto r = run_binary(lesson);
      REQUIRE(r.status == 0);
      const std::string line = sim_line(devices);
      CHECK(count_of(r.out, "ran on") == 1);
      CHECK(has(r.out, line + "PASS " + lesson + ":"));  // just before the verdict
      CHECK_FALSE(has(r.out, "MPI process"));
      // --json carries the backend instead. (--quiet, the verdict alone, is one line for every
      // lesson in test_lessons_dtype.cpp's planted-fault runs.)
      CHECK(j["backend"] == "sim");
    }
    for (const char* command : {"shardlab matmul --a-spec _,Y --b-spec Y,_", "shardlab ffn",
                                "shardlab run harness/cases/gspmd_ffn.toml", "shardlab pipeline"}) {
      const std::string shown = command;
      CAPTURE(shown);
      auto r = run_binary(command);
      REQUIRE(r.status == 0);
      CHECK(count_of(r.out, "ran on") == 1);
      CHECK(std::regex_search(r.out, std::regex("\nran on a simulated mesh: [0-9]+ devices as threads of one process\nPASS ")));
    }
    // The line follows the mesh actually run, down to one device.
    CHECK(has(run_binary("03_dot_product_and_matmul --mesh X=4").out, sim_line(4) + "PASS"));
    CHECK(has(run_binary("09_column_row_pairwise --mesh Y=1").out, sim_line(1) + "PASS"));
    // A plan that runs on no devices says nothing about where it ran.
    auto plan = run_binary("shardlab matmul --plan article --a-spec _,Y --b-spec Y,_ --plan-only");
    CHECK(plan.status == 0);
    CHECK_FALSE(has(plan.out, "ran on"));
  }
}
