// lessons/*.cpp: every lesson's output fits 100 columns, every verdict line in it states its power
// (tests/verdict_powers.hpp), and every command a lesson prints (its Next: and Exercise: lines, and any line that
// starts with build/bin/, with lines ending in a backslash continued) runs as printed from the
// repository's top folder: pasted into a shell it exits 0 (an exercise given no answer: 0 or 1,
// never 2). Commands are run with the binaries under test ($SHARDLAB_BIN).
#include <doctest/doctest.h>

#include <algorithm>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/run_binary.hpp"
#include "tests/verdict_powers.hpp"

using shardlab::testing::bin_dir;
using shardlab::testing::run_binary;
using shardlab::testing::shell_status;
using shardlab::testing::trim;
using shardlab::testing::verdicts_without_power;

namespace {

// The commands in a lesson's output, continuation lines joined.
std::vector<std::string> printed_commands(const std::string& out) {
  std::vector<std::string> cmds;
  std::istringstream in(out);
  std::string line, pending;
  bool continuing = false;
  while (std::getline(in, line)) {
    std::string t = trim(line);
    if (!continuing) {
      for (const char* label : {"Next:", "Exercise:"})
        if (t.rfind(label, 0) == 0) t = trim(t.substr(std::string(label).size()));
      if (t.rfind("build/bin/", 0) != 0) continue;
    }
    continuing = !t.empty() && t.back() == '\\';
    if (continuing) t.pop_back();
    pending += t + " ";
    if (!continuing) {
      cmds.push_back(trim(pending));
      pending.clear();
    }
  }
  return cmds;
}

}  // namespace

TEST_CASE("lessons: every command a lesson prints runs as printed") {
  const char* lessons[] = {"01_mesh_and_layout", "02_reduction_allreduce", "03_dot_product_and_matmul",
                           "04_inner_axes_match", "05_inner_axes_mismatch", "06_outer_axes", "07_full_sharding",
                           "08_gspmd_ffn", "09_column_row_pairwise", "10_pairwise_backward", "11_propagation",
                           "12_attention", "13_transformer_layer", "14_data_parallel", "15_zero", "16_pipeline",
                           "17_3d_parallelism", "18_sequence_parallel", "19_context_parallel", "20_expert_parallel",
                           "21_planning_a_model"};
  int exercises = 0, ran = 0;
  for (const char* lesson : lessons) {
    const std::string name = lesson;
    CAPTURE(name);
    const auto r = run_binary(lesson);
    REQUIRE(r.status == 0);
    const auto cmds = printed_commands(r.out);
    CHECK(!cmds.empty());  // each lesson says what to run next
    for (const std::string& cmd : cmds) {
      CAPTURE(cmd);
      const bool exercise = cmd.find("shardlab exercise") != std::string::npos;
      exercises += exercise;
      // "build/bin/x ..." -> "x ..." under $SHARDLAB_BIN, as a user's shell would run it.
      const std::string rest = cmd.substr(std::string("build/bin/").size());
      const int status = shell_status(bin_dir() + "/" + rest, 300, "</dev/null >/dev/null 2>&1");
      if (exercise)
        CHECK((status == 0 || status == 1));
      else
        CHECK(status == 0);
      ++ran;
    }
  }
  CHECK(exercises == 20);  // every lesson but 16 (pipelines move data by send/recv) names its exercises
  CHECK(ran >= 34);
}

namespace {

// A lesson's sections: "2." or "2a." at the start of a line, in order, none repeated.
void check_sections(const std::string& out) {
  static const std::regex section(R"(^(\d+)([a-z]?)\. )");
  int last = 0;
  char last_part = 0;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, section)) continue;
    CAPTURE(line);
    const int n = std::stoi(m[1]);
    const char part = m[2].length() ? m[2].str()[0] : 0;
    CHECK((n > last || (n == last && part > last_part)));
    last = n;
    last_part = part;
  }
}

// Mesh axes are named in "Mesh X=2,Y=4" lines; no tensor (or its gradient) may be named like one:
// not "Y[...]", "dY[...]" or "Y = ...".
void check_tensor_names(const std::string& out) {
  static const std::regex mesh_line(R"(Mesh ((?:[A-Za-z_]\w*=\d+,?)+))"), axis(R"(([A-Za-z_]\w*)=\d+)");
  std::vector<std::string> axes;
  for (std::sregex_iterator it(out.begin(), out.end(), mesh_line), end; it != end; ++it) {
    const std::string text = (*it)[1];
    for (std::sregex_iterator a(text.begin(), text.end(), axis); a != end; ++a) axes.push_back((*a)[1]);
  }
  for (const auto& a : axes) {
    const std::regex named("(^|[^\\w])d?" + a + R"((\[| = ))");
    std::smatch m;
    CAPTURE(a);
    if (std::regex_search(out, m, named)) {
      const std::string around = out.substr(std::max<long>(0, m.position(0) - 40), 100);
      CAPTURE(around);
      CHECK(false);
    }
  }
}

}  // namespace

TEST_CASE("lessons: output at most 100 columns wide, sections in order, no tensor named like a mesh axis, "
          "every verdict line with its power") {
  // Tables are built to fit; prose and verdict lines are wrapped by Session's output (core/wrap.hpp).
  for (const char* lesson : {"01_mesh_and_layout", "02_reduction_allreduce", "03_dot_product_and_matmul",
                             "04_inner_axes_match", "05_inner_axes_mismatch", "06_outer_axes", "07_full_sharding",
                             "08_gspmd_ffn", "09_column_row_pairwise", "10_pairwise_backward", "11_propagation",
                             "12_attention", "13_transformer_layer", "14_data_parallel", "15_zero", "16_pipeline",
                             "17_3d_parallelism", "18_sequence_parallel", "19_context_parallel", "20_expert_parallel",
                           "21_planning_a_model"}) {
    const std::string name = lesson;
    CAPTURE(name);
    const auto r = run_binary(lesson);
    REQUIRE(r.status == 0);
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      CAPTURE(line);
      CHECK(line.size() <= 100);
    }
    check_sections(r.out);
    check_tensor_names(r.out);
    // "exact", "catches 3.7e-06 x RMS" or what it compares, never "0 x RMS".
    for (const std::string& line : verdicts_without_power(r.out)) CHECK_MESSAGE(false, "no power stated: " << line);
  }
}
