// Lesson 01 as a learner runs it: PASS by default, FAIL when its reference is corrupted, one
// sentence and exit 2 on a mesh that does not divide the 32x256 tensor.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "tests/run_binary.hpp"

using shardlab::testing::run_binary;

TEST_SUITE("lessons") {
  TEST_CASE("lesson 01 passes and shows the article's [16, 64] blocks on 2x4") {
    auto r = run_binary("01_mesh_and_layout --dtype float64");
    CHECK(r.status == 0);
    // Device (row 1, col 3) of the 2x4 mesh holds rows 16:32 and columns 192:256 (article 000's slicing rule).
    CHECK(r.out.find("[16:32, 192:256]") != std::string::npos);
    CHECK(r.out.find("8 distinct blocks of [16, 64]") != std::string::npos);
    CHECK(r.out.find("Takeaway:") != std::string::npos);
    // One section each: the three layouts are 2a-2c, then communication and the verdict once.
    for (const char* s : {"\n2. Layouts.", "\n2a. Mapping {}", "\n2c. Mapping", "\n3. Communication.",
                          "\n4. Verdict. 3 of 3 layouts"})
      CHECK_MESSAGE(r.out.find(s) != std::string::npos, s);
    CHECK(r.out.find("Next:") != std::string::npos);
    CHECK(r.out.rfind("PASS", 0) != 0);  // the verdict is the last line, not the first
    CHECK(r.out.find("\nPASS 01_mesh_and_layout") != std::string::npos);
  }

  TEST_CASE("lesson 01 runs on every 8-device mesh shape of the article") {
    for (const char* mesh : {"mesh_rows=8", "mesh_rows=4,mesh_cols=2", "X=2,Y=2,Z=2", "2x4"}) {
      CAPTURE(mesh);
      auto r = run_binary(std::string("01_mesh_and_layout --quiet --mesh ") + mesh);
      CHECK(r.status == 0);
      CHECK(r.out.rfind("PASS", 0) == 0);
    }
  }

  TEST_CASE("lesson 01 fails when its expected result is wrong") {
    auto r = run_binary("01_mesh_and_layout --dtype float64 --quiet --inject perturb:1e-9");
    CHECK(r.status == 1);
    CHECK(r.out.rfind("FAIL", 0) == 0);
  }

  TEST_CASE("lesson 01 rejects a 3x3 mesh with one sentence and exit 2") {
    auto r = run_binary("01_mesh_and_layout --dtype float64 --mesh mesh_rows=3,mesh_cols=3");
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(shardlab::testing::count_lines(r.err) == 1);
    CHECK(r.err.find("dim 0 of x (size 32) is not divisible by mesh axis mesh_rows (size 3)") != std::string::npos);
  }

  TEST_CASE("lesson 01 rejects a mapping that uses one mesh axis twice") {
    auto r = run_binary("01_mesh_and_layout --dtype float64 --mapping input_rows:mesh_cols,input_cols:mesh_cols");
    CHECK(r.status == 2);
    CHECK(r.err.find("mesh_cols twice") != std::string::npos);
  }

  TEST_CASE("lesson 01 rejects a mapping of a tensor axis X does not have") {
    auto r = run_binary("01_mesh_and_layout --dtype float64 --mapping batch:mesh_rows");
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(shardlab::testing::count_lines(r.err) == 1);
    CHECK(r.err.find("tensor axis batch") != std::string::npos);
  }

  TEST_CASE("lesson 01 --json: three exact checks and no communication") {
    auto r = run_binary("01_mesh_and_layout --dtype float64 --json");
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    CHECK(j["mesh"]["mesh_rows"] == 2);
    CHECK(j["mesh"]["mesh_cols"] == 4);
    CHECK(j["checks"].size() == 3);
    CHECK(j["collectives"].empty());
    CHECK(j["bytes_per_device"] == 0);
  }
}
