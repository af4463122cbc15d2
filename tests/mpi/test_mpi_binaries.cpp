// Binaries started the wrong way, as a learner might: one sentence on stderr and exit 2, within
// seconds; and the collectives benchmark. Rank 0 runs them (a nested mpiexec with a clean
// environment), only in a suite of at most 2 ranks: they do not depend on its rank count, and idle
// ranks polling beside nested ones only slow a small machine down.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unistd.h>
#include <vector>

#include "collectives/mpi.hpp"
#include "tests/run_binary.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

namespace {
// A clean environment: the child must not join this job's process manager.
const std::string kClean = shardlab::testing::clean_env();
bool runs_here() { return shardlab::mpi::is_root() && shardlab::mpi::world_size() <= 2; }
}  // namespace

TEST_SUITE("mpi binaries") {
  TEST_CASE("mpiexec with more processes than the mesh has devices: one sentence, exit 2") {
    if (!runs_here()) return;
    auto r = run_binary("shardlab bench collectives --backend mpi --mesh X=2 --max 1K", kClean + "mpiexec -n 3 ");
    CHECK(r.status == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find("mesh X=2 needs 2 processes, mpiexec started 3") != std::string::npos);
    CHECK(r.out.empty());
  }

  TEST_CASE("every lesson and command on the wrong process count: one sentence before any output, exit 2") {
    if (!runs_here()) return;
    // Default meshes have 8 devices; 3 processes fit none of them. Lessons 09 and 10 would take a
    // line of 3 by default, so they are given their usual Y=4.
    for (const char* program : {"01_mesh_and_layout", "02_reduction_allreduce", "03_dot_product_and_matmul",
                                "04_inner_axes_match", "05_inner_axes_mismatch", "06_outer_axes",
                                "07_full_sharding", "08_gspmd_ffn", "09_column_row_pairwise --mesh Y=4",
                                "10_pairwise_backward --mesh Y=4", "11_propagation", "12_attention", "13_transformer_layer",
                                "14_data_parallel", "16_pipeline", "17_3d_parallelism", "shardlab pipeline",
                                "shardlab matmul --a-spec _,Y --b-spec Y,_",
                                "shardlab ffn", "shardlab run harness/cases/gspmd_ffn.toml"}) {
      const std::string name = program;
      CAPTURE(name);
      auto r = run_binary(std::string(program) + " --backend mpi", kClean + "mpiexec -n 3 ");
      CHECK(r.status == 2);
      CHECK(count_lines(r.err) == 1);
      CHECK(r.err.find("processes, mpiexec started 3") != std::string::npos);
      CHECK(r.out.empty());
    }
  }

  TEST_CASE("--plan-only runs on no devices, so any process count will do") {
    if (!runs_here()) return;
    for (const std::string& launch : {kClean, kClean + "mpiexec -n 2 "}) {  // clean: not this job's PMI
      CAPTURE(launch);
      auto r = run_binary("shardlab matmul --plan article --a-spec _,Y --b-spec Y,_ --plan-only --backend mpi", launch);
      CHECK(r.status == 0);
      CHECK(r.err.empty());
      // Printed once (by rank 0), however many processes. One ring AllReduce of the 4x4 C in the
      // default float32 over Y (4 devices): 2(n-1)/n x 64 bytes.
      CHECK(r.out.find("predicted: 96 bytes sent per device in 1 collective") != std::string::npos);
      const std::size_t first = r.out.find("Plan for");
      CHECK(first != std::string::npos);
      CHECK(r.out.find("Plan for", first + 1) == std::string::npos);
    }
  }

  TEST_CASE("--backend mpi without mpiexec on a mesh of 2: one sentence that says how, exit 2") {
    if (!runs_here()) return;
    auto r = run_binary("shardlab bench collectives --backend mpi --mesh X=2 --max 1K", kClean);
    CHECK(r.status == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find("not started by mpiexec") != std::string::npos);
    CHECK(r.err.find("mpiexec -n 2 ") != std::string::npos);
  }

  TEST_CASE("every lesson under mpiexec -n 2 in an element type by turns; lesson 12 on MPICH's collectives in every type") {
    if (!runs_here()) return;
    // Every lesson takes a 2-device mesh (none is fixed at 8 devices): a 1x2 mesh for the 2D ones,
    // and 09/10 make their line Y=2 from the process count. X=1,Y=2 rather than X=2,Y=1, which
    // lesson 08 does not survive (see test_lessons_dtype.cpp).
    // What depends on the element type under MPI is the transport's (collectives/mpi_transport.cpp):
    // on our ring, the MPI datatype each step moves and adds (every reducing lesson reaches it);
    // on MPICH's own collectives (--collectives native), also the reduction ops, bfloat16's being
    // user ops for sum and max. So each lesson runs on the ring in one type, the three taking turns
    // down the list, and lesson 12 (its softmax all-reduces by max on 1x2, beside sums) runs on
    // native collectives in all three; lesson 02 below runs in all three with its bytes checked.
    // Every lesson in every type is the sim suite's (test_lessons_dtype.cpp); here that was 42
    // launches, 12 s.
    const struct { const char* name; double bytes; } types[] = {{"float32", 4}, {"float64", 8}, {"bfloat16", 2}};
    std::vector<std::string> commands;
    int turn = 0;
    for (const char* program : {"01_mesh_and_layout --mesh mesh_rows=1,mesh_cols=2", "03_dot_product_and_matmul --mesh X=1,Y=2",
                                "04_inner_axes_match --mesh X=1,Y=2", "05_inner_axes_mismatch --mesh X=1,Y=2",
                                "06_outer_axes --mesh X=1,Y=2", "07_full_sharding --mesh X=1,Y=2",
                                "08_gspmd_ffn --mesh X=1,Y=2", "09_column_row_pairwise", "10_pairwise_backward",
                                "11_propagation --mesh X=1,Y=2", "12_attention --mesh X=1,Y=2",
                                "13_transformer_layer --mesh X=1,Y=2", "14_data_parallel --mesh X=2", "15_zero"})
      commands.push_back(std::string(program) + " --dtype " + types[turn++ % 3].name);
    for (const auto& t : types)
      if (t.name != std::string("bfloat16"))
        commands.push_back(std::string("12_attention --mesh X=1,Y=2 --collectives native --dtype ") + t.name);
    // bfloat16 on MPICH's collectives has no replay: its checks against the unsharded reference are
    // above the 3e-2 floor (WEAK), which fails the run (docs/verification.md). Every value must
    // still be within its tolerance, so a wrong bfloat16 max or sum fails a check of its own.
    {
      auto r = run_binary("12_attention --mesh X=1,Y=2 --collectives native --dtype bfloat16 --backend mpi --json",
                          shardlab::testing::clean_mpiexec(2));
      CHECK(r.status == 1);
      const auto j = nlohmann::json::parse(r.out);
      int weak = 0;
      for (const auto& c : j["checks"]) {
        CAPTURE(c["name"].get<std::string>());
        CHECK(c["pass"] == true);
        weak += c.value("weak", false);
      }
      CHECK(weak > 0);
    }
    for (const auto& c : commands) {
      const std::string command = c + " --backend mpi --quiet";
      CAPTURE(command);
      auto r = run_binary(command, shardlab::testing::clean_mpiexec(2));
      CHECK(r.status == 0);
      CHECK(r.out.rfind("PASS", 0) == 0);
      CHECK(count_lines(r.out) == 1);  // the root alone prints the verdict
    }
    // Lesson 02 on 1x2 in JSON: each device sums its [32, 128] block to 32 partial sums; the ring
    // AllReduce over 2 devices sends 2(n-1)/n of them, the ReduceScatter (n-1)/n.
    for (const auto& t : types) {
      const std::string type = t.name;
      CAPTURE(type);
      auto r = run_binary("02_reduction_allreduce --mesh mesh_rows=1,mesh_cols=2 --backend mpi --json --dtype " + type,
                          kClean + "mpiexec -n 2 ");
      REQUIRE(r.status == 0);
      const auto j = nlohmann::json::parse(r.out);
      CHECK(j["pass"] == true);
      CHECK(j["backend"] == "mpi");
      CHECK(j["dtype"] == type);
      CHECK(j["element_bytes"].get<double>() == t.bytes);
      REQUIRE(j["collectives"].size() == 2);
      CHECK(j["collectives"][0]["op"] == "all_reduce");
      CHECK(j["collectives"][0]["bytes_per_device"].get<double>() == 2 * (2 - 1) / 2.0 * 32 * t.bytes);
      CHECK(j["collectives"][0]["predicted_bytes_per_device"] == j["collectives"][0]["bytes_per_device"]);
      CHECK(j["collectives"][1]["op"] == "reduce_scatter");
      CHECK(j["collectives"][1]["bytes_per_device"].get<double>() == (2 - 1) / 2.0 * 32 * t.bytes);
    }
  }

  TEST_CASE("a text report under mpiexec -n 2 says once, beside its verdict, that it ran on 2 MPI processes") {
    if (!runs_here()) return;
    for (const char* program : {"03_dot_product_and_matmul --mesh X=1,Y=2", "09_column_row_pairwise", "shardlab ffn --mesh X=1,Y=2"}) {
      const std::string command = std::string(program) + " --backend mpi";
      CAPTURE(command);
      auto r = run_binary(command, shardlab::testing::clean_mpiexec(2));
      CHECK(r.status == 0);
      const std::size_t at = r.out.find("\nran on 2 MPI processes (mpiexec -n 2), one device each\nPASS ");
      CHECK(at != std::string::npos);
      CHECK(r.out.find("ran on", at + 2) == std::string::npos);  // once: rank 0 alone prints
      CHECK(r.out.find("simulated") == std::string::npos);
    }
  }

  TEST_CASE("--trace under mpiexec -n 2: one device track per process, every ledger row once on its device") {
    if (!runs_here()) return;
    const std::string path = "/tmp/shardlab_mpi_trace_" + std::to_string(::getpid()) + ".json";
    auto r = run_binary("15_zero --backend mpi --json --trace " + path, kClean + "mpiexec -n 2 ");
    REQUIRE(r.status == 0);
    const auto report = nlohmann::json::parse(r.out);
    std::ifstream in(path);
    const auto trace = nlohmann::json::parse(in);
    std::remove(path.c_str());
    std::set<int> devices;
    std::map<std::tuple<int, int, int>, int> rows;  // (device, run, call) -> events
    for (const auto& e : trace["traceEvents"]) {
      if (e["ph"] == "M" && e["name"] == "process_name") devices.insert(e["pid"].get<int>() - 1);  // pid = device + 1
      if (e["ph"] == "X" && e["cat"] == "communication")
        rows[{e["args"]["device"].get<int>(), e["args"]["run"].get<int>(), e["args"]["call"].get<int>()}] += 1;
    }
    CHECK(devices == std::set<int>{0, 1});
    // Every collective of the report is one row on each of the 2 devices, each seen once.
    CHECK(rows.size() == 2 * report["collectives"].size());
    for (const auto& [key, count] : rows) CHECK(count == 1);
  }

  TEST_CASE("the collectives benchmark at 2 ranks: every size checked, #wrong 0, ours and native side by side") {
    if (!runs_here()) return;
    auto r = run_binary("shardlab bench collectives --backend mpi --max 8K --iters 1 --warmup 0",
                        kClean + "mpiexec -n 2 ");
    CHECK(r.status == 0);
    CHECK(r.out.find("# total #wrong: 0") != std::string::npos);
    for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}) CHECK(r.out.find(op) != std::string::npos);
    CHECK(r.out.find("MPICH") != std::string::npos);
  }

  TEST_CASE("the benchmark on the sim backend: ours only, and a wrong expectation shows as #wrong and exit 1") {
    if (!runs_here()) return;
    auto ok = run_binary("shardlab bench collectives --max 4K --iters 1 --warmup 0");
    CHECK(ok.status == 0);
    CHECK(ok.out.find("# total #wrong: 0") != std::string::npos);
    CHECK(ok.out.find("native_us") == std::string::npos);
    auto bad = run_binary("shardlab bench collectives --max 4K --iters 1 --warmup 0 --perturb-expected");
    CHECK(bad.status == 1);
    CHECK(bad.out.find("# total #wrong: 0") == std::string::npos);
  }
}

TEST_SUITE("mpi binaries") {
  TEST_CASE("shardlab check on 4 processes: the cases on 4 devices pass on real processes, forward and backward (pad included); the 8-device ones are errors") {
    if (!runs_here()) return;
    auto r = run_binary("shardlab check harness/cases --backend mpi", shardlab::testing::clean_mpiexec(4));
    CAPTURE(r.out);
    CHECK(r.status == 2);
    for (const char* s : {"PASS column_ffn: ", "PASS data_ffn: ", "PASS pairwise_ffn: ", "PASS row_column_ffn: ",
                          "PASS row_ffn: ", "PASS column_ffn_backward: ", "PASS data_ffn_backward: ",
                          "PASS pairwise_ffn_backward: ", "PASS row_column_ffn_backward: ", "PASS row_ffn_backward: ",
                          "ERROR harness/cases/gspmd_ffn.toml: mesh X=2,Y=4 needs 8 processes, this run has 4",
                          "ERROR harness/cases/gspmd_ffn_backward.toml: mesh X=2,Y=4 needs 8 processes",
                          "PASS attention_megatron: ", "PASS attention_sequence: ", "PASS attention_ring_step: ",
                          "ERROR harness/cases/attention_gspmd.toml: mesh X=2,Y=4 needs 8 processes",
                          "PASS esm2_layer: ", "ERROR harness/cases/transformer_gspmd.toml: mesh X=2,Y=4 needs 8",
                          "PASS transformer_sequence_parallel: ",
                          "ERROR harness/cases/attention_12_heads.toml: mesh Y=8 needs 8 processes",
                          "ERROR harness/cases/nested_4x4_embedding_softmax.toml: mesh X=4,Y=4 needs 16 processes",
                          "PASS attention_fused_qkv: ", "PASS softmax_padded_sequence: 3 collectives, 204 B/device",
                          "ERROR harness/cases/dtensor_relu_sum.toml: mesh X=2,Y=4 needs 8 processes",
                          "PASS padded_unary_ops: ", "PASS uneven_chunk_moves: ",
                          "ERROR harness/cases/max_over_split.toml: mesh Y=2 needs 2 processes",
                          "19 passed, 0 failed, 9 invalid"})
      CHECK_MESSAGE(r.out.find(s) != std::string::npos, s);
  }
}
