// Every lesson under every element type, on the sim backend. A collective moves the same number of
// elements whatever their type, so its bytes are the float64 run's bytes times element_bytes / 8
// (and the cost model must predict exactly that); the verdict still passes, a corrupted reference
// still fails, and a type the lessons do not know is one sentence and exit 2.
#include <set>
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <iterator>
#include <string>

#include "tests/run_binary.hpp"
#include "tests/sanitized.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

namespace {
const char* const kLessons[] = {"01_mesh_and_layout",     "02_reduction_allreduce", "03_dot_product_and_matmul",
                                "04_inner_axes_match",    "05_inner_axes_mismatch", "06_outer_axes",
                                "07_full_sharding",       "08_gspmd_ffn",           "09_column_row_pairwise",
                                "10_pairwise_backward",   "11_propagation",         "12_attention",
                                "13_transformer_layer",   "14_data_parallel",       "15_zero",
                                "16_pipeline",            "17_3d_parallelism", "18_sequence_parallel", "19_context_parallel", "20_expert_parallel"};
struct Type {
  const char* name;
  double bytes;  // per element, from the formats: IEEE single 4, double 8, bfloat16 2
};
const Type kTypes[] = {{"float32", 4}, {"float64", 8}, {"bfloat16", 2}};

nlohmann::json run_json(const std::string& command) {
  auto r = run_binary(command);
  INFO(command);
  INFO(r.err);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out);
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Whether the k-th lesson runs in type t: every type in the normal build; under a sanitizer
// (tests/sanitized.hpp) one type per lesson in turn, so each lesson and each type still runs.
bool runs_in(std::size_t k, const Type& t) {
  return !shardlab::testing::kSanitized || &t - kTypes == static_cast<std::ptrdiff_t>(k % std::size(kTypes));
}
}  // namespace

TEST_SUITE("lessons") {
  TEST_CASE("every lesson in every element type: pass, its dtype, and float64's bytes scaled by the element size") {
    for (std::size_t k = 0; k < std::size(kLessons); ++k) {
      const std::string name = kLessons[k];
      CAPTURE(name);
      const auto base = run_json(name + " --dtype float64 --json");
      REQUIRE(base["dtype"] == "float64");
      REQUIRE(base["element_bytes"] == 8);
      for (const Type& t : kTypes) {
        const std::string type = t.name;
        if (type != "float64" && !runs_in(k, t)) continue;
        CAPTURE(type);
        const auto j = type == "float64" ? base : run_json(name + " --dtype " + type + " --json");
        CHECK(j["pass"] == true);
        CHECK(j["dtype"] == type);
        CHECK(j["element_bytes"].get<double>() == t.bytes);
        const double scale = t.bytes / 8;
        REQUIRE(j["collectives"].size() == base["collectives"].size());
        for (std::size_t i = 0; i < j["collectives"].size(); ++i) {
          CAPTURE(i);
          const auto& c = j["collectives"][i];
          const auto& b = base["collectives"][i];
          CHECK(c["op"] == b["op"]);
          CHECK(c["axes"] == b["axes"]);
          CHECK(c["tensor"] == b["tensor"]);
          CHECK(c["group_size"] == b["group_size"]);
          CHECK(c["bytes_per_device"].get<double>() == b["bytes_per_device"].get<double>() * scale);
          CHECK(c["predicted_bytes_per_device"].get<double>() == c["bytes_per_device"].get<double>());
        }
        CHECK(j["bytes_per_device"].get<double>() == base["bytes_per_device"].get<double>() * scale);
        // Lesson 08's extra totals: bytes and memory scale with the element, FLOPs do not.
        for (const auto& kv : base.items()) {
          const std::string key = kv.key();
          if (!kv.value().is_number() || key == "element_bytes" || key == "max_abs_error" || key == "tolerance") continue;
          // Lesson 17's GPT-3 figures are the published model's, in its own element type.
          if (key.rfind("gpt3_", 0) == 0) continue;
          CAPTURE(key);
          REQUIRE(j.contains(key));
          if (has(key, "bytes") || has(key, "memory"))
            CHECK(j[key].get<double>() == kv.value().get<double>() * scale);
          else if (has(key, "flops") || has(key, "collectives"))
            CHECK(j[key] == kv.value());
        }
      }
    }
  }

  TEST_CASE("every lesson in every element type fails on one element off by its type's power floor") {
    // --inject perturb:E multiplies one element of each result block of the last device by (1 + E),
    // E = the floor (verify.hpp). Lessons whose bfloat16 checks are above the floor (WEAK) may let
    // it through; they must say WEAK on the verdict line, and are listed here until they reach it.
    // None is since bfloat16 runs are compared with their replay (collectives/replay.hpp).
    const std::set<std::string> weak_in_bfloat16 = {};
    for (std::size_t k = 0; k < std::size(kLessons); ++k)
      for (const Type& t : kTypes) {
        if (!runs_in(k, t)) continue;
        const char* lesson = kLessons[k];
        const std::string e = t.name == std::string("float64") ? "1e-9" : t.name == std::string("float32") ? "1e-3" : "3e-2";
        const std::string command = std::string(lesson) + " --dtype " + t.name + " --quiet --inject perturb:" + e;
        CAPTURE(command);
        auto r = run_binary(command);
        CHECK(count_lines(r.out) == 1);
        if (t.name == std::string("bfloat16") && weak_in_bfloat16.count(lesson) && r.status == 0) {
          CHECK(r.out.find(" WEAK") != std::string::npos);
          continue;
        }
        CHECK(r.status == 1);
        CHECK(r.out.rfind("FAIL", 0) == 0);
      }
  }

  TEST_CASE("the text report names the element type once, with its size") {
    for (const Type& t : kTypes) {
      const std::string type = t.name;
      CAPTURE(type);
      auto r = run_binary("02_reduction_allreduce --dtype " + type);
      CHECK(r.status == 0);
      const std::string line = "element type: " + type + ", " + std::to_string(static_cast<int>(t.bytes)) + " B per element\n";
      const auto at = r.out.find(line);
      CHECK(at != std::string::npos);
      CHECK(r.out.find("element type:", at + 1) == std::string::npos);
      CHECK(has(r.out, "\nPASS 02_reduction_allreduce"));
    }
  }

  TEST_CASE("shardlab matmul, K split over Y: one AllReduce of the 4x4 C, 2(n-1)/n x element size x 16") {
    // n = 4 devices on Y; C has 16 elements. The articles' plan (Case 1A): the search would also
    // split the AllReduce over the idle X axis and gather after it (80 bytes instead of 96).
    const double n = 4;
    const auto j = run_json("shardlab matmul --plan article --a-spec _,Y --b-spec Y,_ --json");  // default: float32
    CHECK(j["pass"] == true);
    CHECK(j["dtype"] == "float32");
    CHECK(j["element_bytes"] == 4);
    REQUIRE(j["collectives"].size() == 1);
    CHECK(j["collectives"][0]["op"] == "all_reduce");
    CHECK(j["collectives"][0]["group_size"] == 4);
    CHECK(j["collectives"][0]["bytes_per_device"].get<double>() == 2 * (n - 1) / n * 4 * 16);  // 96
    CHECK(j["collectives"][0]["predicted_bytes_per_device"].get<double>() == 96);
    const auto h = run_json("shardlab matmul --plan article --a-spec _,Y --b-spec Y,_ --json --dtype bfloat16");
    CHECK(h["pass"] == true);
    CHECK(h["dtype"] == "bfloat16");
    CHECK(h["element_bytes"] == 2);
    REQUIRE(h["collectives"].size() == 1);
    CHECK(h["collectives"][0]["op"] == "all_reduce");
    CHECK(h["collectives"][0]["bytes_per_device"].get<double>() == 2 * (n - 1) / n * 2 * 16);  // 48
    CHECK(h["collectives"][0]["predicted_bytes_per_device"].get<double>() == 48);
  }

  TEST_CASE("an unknown --dtype: one sentence naming it, exit 2, nothing on stdout") {
    for (const char* lesson : kLessons) {
      const std::string name = lesson;
      CAPTURE(name);
      auto r = run_binary(name + " --dtype float16");
      CHECK(r.status == 2);
      CHECK(r.out.empty());
      CHECK(count_lines(r.err) == 1);
      CHECK(has(r.err, "float16"));
    }
    for (const char* command : {"shardlab matmul --a-spec _,Y --b-spec Y,_ --dtype half --json", "shardlab ffn --dtype fp32"}) {
      const std::string c = command;
      CAPTURE(c);
      auto r = run_binary(c);
      CHECK(r.status == 2);
      CHECK(r.out.empty());
      CHECK(count_lines(r.err) == 1);
      CHECK(has(r.err, c.find("half") != std::string::npos ? "'half'" : "'fp32'"));
    }
  }

  TEST_CASE("every lesson on a 2-device mesh in every element type (what the MPI suite runs at 2 ranks)") {
    std::size_t k = 0;
    for (const char* program : {"01_mesh_and_layout --mesh mesh_rows=1,mesh_cols=2", "02_reduction_allreduce --mesh mesh_rows=1,mesh_cols=2",
                                "03_dot_product_and_matmul --mesh X=1,Y=2", "04_inner_axes_match --mesh X=1,Y=2",
                                "05_inner_axes_mismatch --mesh X=1,Y=2", "06_outer_axes --mesh X=1,Y=2",
                                "07_full_sharding --mesh X=1,Y=2", "08_gspmd_ffn --mesh X=1,Y=2",
                                "09_column_row_pairwise --mesh Y=2", "10_pairwise_backward --mesh Y=2",
                                "11_propagation --mesh X=1,Y=2", "12_attention --mesh X=1,Y=2",
                                "13_transformer_layer --mesh X=1,Y=2", "14_data_parallel --mesh X=2", "15_zero --mesh X=2"}) {
      for (const Type& t : kTypes) {
        if (!runs_in(k, t)) continue;
        const std::string command = std::string(program) + " --dtype " + t.name + " --quiet";
        CAPTURE(command);
        auto r = run_binary(command);
        CHECK(r.status == 0);
        CHECK(r.out.rfind("PASS", 0) == 0);
      }
      ++k;
    }
  }

  TEST_CASE("lesson 02 on 1x2: the AllReduce of 32 partial sums moves 2(n-1)/n of them, n = 2, in each type") {
    for (const Type& t : kTypes) {
      const std::string type = t.name;
      CAPTURE(type);
      const auto j = run_json("02_reduction_allreduce --mesh mesh_rows=1,mesh_cols=2 --json --dtype " + type);
      REQUIRE(j["collectives"].size() == 2);
      CHECK(j["collectives"][0]["op"] == "all_reduce");
      CHECK(j["collectives"][0]["bytes_per_device"].get<double>() == 2 * (2 - 1) / 2.0 * 32 * t.bytes);
      CHECK(j["collectives"][1]["op"] == "reduce_scatter");
      CHECK(j["collectives"][1]["bytes_per_device"].get<double>() == (2 - 1) / 2.0 * 32 * t.bytes);
    }
  }

  TEST_CASE("lesson 08 with a Y axis of size 1 runs (the ReduceScatter moves 0 bytes)") {
    // X=2,Y=1 is a valid 2-device mesh (shardlab ffn runs on it); y's ReduceScatter over Y moves
    // nothing, and the text's "AllReduce costs Nx as much" ratio must not divide by it.
    for (const char* mesh : {"X=2,Y=1", "X=1,Y=1"}) {
      const std::string m = mesh;
      CAPTURE(m);
      auto r = run_binary("08_gspmd_ffn --quiet --mesh " + m);
      CHECK(r.status == 0);
      CHECK(r.out.rfind("PASS", 0) == 0);
    }
  }
}
