// This machine in the cost model: a machine.dat read back into the this-machine preset, and the
// commands that take --machine (cost, ffn, sweep), with expected times worked out by hand from the
// file's figures.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "harness/cost/cost.hpp"
#include "harness/cost/machine.hpp"
#include "harness/models/sweep.hpp"
#include "run_binary.hpp"

using namespace shardlab;
using namespace shardlab::testing;
namespace fs = std::filesystem;

namespace {

// Written by hand in machine.dat's format: GEMM 20 GFLOP/s, reduction 10 GB/s, alpha 2 us, link 4 GB/s.
const char* kMachineDat =
    "# shardlab sweep --what machine: a machine made up for the tests\n"
    "# measured: 2026-11-23 03:40 UTC on host test (2 cores)\n"
    "# columns: 1 gemm_n, 2 gemm_GFLOPs, 3 reduce_B, 4 reduce_GBps, 5 alpha_us, 6 link_GBps, 7 fit_sizes, 8 fit_err_pct\n"
    "#   gemm_n  gemm_GFLOPs  reduce_B  reduce_GBps  alpha_us  link_GBps  fit_sizes  fit_err_pct\n"
    "     512        20.000   8388608       10.000     2.000      4.000         12         50.0\n";

fs::path write_file(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / ("shardlab_machine_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p) << text;
  return p;
}

}  // namespace

TEST_CASE("machine.dat: its figures become the this-machine preset") {
  const Hardware h = machine_from_dat(kMachineDat, "m.dat");
  CHECK(h.name == "this-machine");
  CHECK(h.flops_per_s == doctest::Approx(20e9));
  CHECK(h.reduce_bytes_per_s == doctest::Approx(10e9));
  CHECK(h.alpha == doctest::Approx(2e-6));
  CHECK(h.bytes_per_s == doctest::Approx(4e9));
  CHECK(h.element_bytes == 8);
  CHECK(h.source.find("m.dat") != std::string::npos);
  CHECK(h.source.find("measured 2026-11-23 03:40 UTC on host test") != std::string::npos);
}

TEST_CASE("machine.dat of a sim run: no link, so alpha and the link stay the stored preset's") {
  std::string sim = kMachineDat;
  sim.replace(sim.find("     512"), std::string::npos, "     512        20.000   8388608       10.000         -          -          -            -\n");
  const Hardware h = machine_from_dat(sim, "sim.dat"), stored = hardware_preset("this-machine");
  CHECK(h.flops_per_s == doctest::Approx(20e9));
  CHECK(h.alpha == stored.alpha);
  CHECK(h.bytes_per_s == stored.bytes_per_s);
  CHECK(h.source.find("no link") != std::string::npos);
}

TEST_CASE("machine.dat written by the sweep reads back the same figures") {
  MachineRates m;
  m.gemm_n = 256;
  m.gemm_flops_per_s = 33e9;
  m.reduce_bytes = 1 << 20;
  m.reduce_bytes_per_s = 12e9;
  LinkFit f;
  f.alpha = 1.5e-6;
  f.bytes_per_s = 6e9;
  f.points = 12;
  const Hardware h = machine_from_dat(machine_table(m, &f, "test").text(), "round.dat");
  CHECK(h.flops_per_s == doctest::Approx(33e9));
  CHECK(h.reduce_bytes_per_s == doctest::Approx(12e9));
  CHECK(h.alpha == doctest::Approx(1.5e-6));
  CHECK(h.bytes_per_s == doctest::Approx(6e9));
  CHECK(h.source.find("measured 20") != std::string::npos);  // the sweep stamps when and where
}

TEST_CASE("machine.dat: alpha may be 0 (the fit clamps a negative intercept there)") {
  MachineRates m;
  m.gemm_n = 64;
  m.gemm_flops_per_s = 1e9;
  m.reduce_bytes = 1024;
  m.reduce_bytes_per_s = 1e9;
  LinkFit f;
  f.alpha = 0;
  f.bytes_per_s = 2e9;
  const Hardware h = machine_from_dat(machine_table(m, &f, "test").text(), "zero.dat");
  CHECK(h.alpha == 0);
  CHECK(h.bytes_per_s == doctest::Approx(2e9));
  f.alpha = 3e-10;  // 0.0003 us: written with enough digits to read back
  CHECK(machine_from_dat(machine_table(m, &f, "test").text(), "tiny.dat").alpha == doctest::Approx(3e-10));
}

TEST_CASE("machine.dat: anything else is a parse error naming the file") {
  std::string bad_number = kMachineDat;
  bad_number.replace(bad_number.find("20.000"), 6, "-3.000");
  std::string half_link = kMachineDat, huge = kMachineDat;
  half_link.replace(half_link.find("4.000"), 5, "    -");
  huge.replace(huge.find("20.000"), 6, "1e+307");
  for (const std::string& text : {std::string("# nothing here\n"), std::string("not a table\n"), bad_number, half_link, huge,
                                  std::string(kMachineDat).substr(0, std::string(kMachineDat).size() - 20)}) {
    CAPTURE(text);
    try {
      machine_from_dat(text, "bad.dat");
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::parse);
      CHECK(std::string(e.what()).find("bad.dat") != std::string::npos);
    }
  }
}

TEST_CASE("machine.dat: launch_us reads back; a file without it (older) reads as launch 0 and says so") {
  // kMachineDat has no launch_us column: written before the sweep fitted one.
  const Hardware old = machine_from_dat(kMachineDat, "old.dat");
  CHECK(old.launch == 0);
  CHECK(old.alpha == doctest::Approx(2e-6));
  CHECK(old.source.find("no launch_us column") != std::string::npos);
  MachineRates m;
  m.gemm_n = 64;
  m.gemm_flops_per_s = 1e9;
  m.reduce_bytes = 1024;
  m.reduce_bytes_per_s = 1e9;
  LinkFit f;
  f.launch = 7.5e-6;
  f.alpha = 1.25e-6;
  f.bytes_per_s = 2e9;
  f.launch_fitted = true;
  const Hardware h = machine_from_dat(machine_table(m, &f, "test").text(), "new.dat");
  CHECK(h.launch == doctest::Approx(7.5e-6));
  CHECK(h.alpha == doctest::Approx(1.25e-6));
  CHECK(h.source.find("launch 7.5 us") != std::string::npos);
  // A sim run's file: no link, so launch stays the stored preset's too.
  const Hardware sim = machine_from_dat(machine_table(m).text(), "sim.dat");
  CHECK(sim.launch == hardware_preset("this-machine").launch);
}

TEST_CASE("machine.dat: a negative launch is one sentence on stderr and exit 2") {
  MachineRates m;
  m.gemm_n = 64;
  m.gemm_flops_per_s = 1e9;
  m.reduce_bytes = 1024;
  m.reduce_bytes_per_s = 1e9;
  LinkFit f;
  f.launch = 7.5e-6;
  f.alpha = 1.25e-6;
  f.bytes_per_s = 2e9;
  std::string text = machine_table(m, &f, "test").text();
  const std::size_t at = text.find(" 7.5 ");
  REQUIRE(at != std::string::npos);
  text.replace(at, 5, " -7.5 ");
  try {
    machine_from_dat(text, "neg.dat");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::parse);
    CHECK(std::string(e.what()).find("neg.dat: launch_us is '-7.5'") != std::string::npos);
  }
  const fs::path p = write_file("neg.dat", text);
  const auto bad = run_binary("shardlab cost --machine " + p.string());
  CHECK(bad.status == 2);
  CHECK(count_lines(bad.err) == 1);
  CHECK(bad.err.find("launch_us") != std::string::npos);
  CHECK(bad.out.empty());
  fs::remove(p);
}

TEST_CASE("presets_with_machine: only this-machine changes; an unreadable file is an io error") {
  CHECK(presets_with_machine("").size() == hardware_presets().size());
  const fs::path p = write_file("presets.dat", kMachineDat);
  const auto presets = presets_with_machine(p.string());
  REQUIRE(presets.size() == hardware_presets().size());
  for (std::size_t i = 0; i < presets.size(); ++i) {
    CAPTURE(presets[i].name);
    CHECK(presets[i].name == hardware_presets()[i].name);
    if (presets[i].name == "this-machine")
      CHECK(presets[i].flops_per_s == doctest::Approx(20e9));
    else
      CHECK(presets[i].flops_per_s == hardware_presets()[i].flops_per_s);
  }
  try {
    presets_with_machine("/nonexistent/machine.dat");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::io);
  }
  fs::remove(p);
}

TEST_CASE("shardlab cost and ffn --machine: times from the file's figures, by hand") {
  const fs::path p = write_file("cmd.dat", kMachineDat);
  // ring all_reduce of 1 MiB on 2 devices: 2 steps of 2 us, 2 * 1 MiB / 2 over 4 GB/s, 1 MiB / 2 reduced at 10 GB/s.
  const auto cost = run_binary("shardlab cost --machine " + p.string() +
                               " --preset this-machine --op all_reduce --bytes 1M --devices 2 --json");
  REQUIRE(cost.status == 0);
  const auto j = nlohmann::json::parse(cost.out);
  CHECK(j["presets"][0]["flops_per_s"].get<double>() == doctest::Approx(20e9));
  CHECK(j["rows"][0]["algorithm"] == "ring");
  CHECK(j["rows"][0]["seconds"].get<double>() == doctest::Approx(4e-6 + 1048576.0 / 4e9 + 524288.0 / 10e9));

  // --machine alone models the step on this machine: compute = FLOPs per device / 20 GFLOP/s.
  const auto ffn = run_binary("shardlab ffn --dtype float64 --plan-only --json --machine " + p.string());
  REQUIRE(ffn.status == 0);
  const auto f = nlohmann::json::parse(ffn.out);
  CHECK(f["model"]["preset"] == "this-machine");
  // gspmd on 2x4 at the default B=8,S=4,M=16,H=64: each device multiplies x [4,4,16] by W_in [16,16]
  // and h [4,4,16] by W_out [16,16]: 2 * 2*4*4*16*16 = 16384 FLOPs.
  CHECK(f["model"]["compute_seconds"].get<double>() == doctest::Approx(16384 / 20e9));

  for (const std::string cmd : {"shardlab cost --machine /nonexistent.dat", "shardlab ffn --plan-only --machine /etc/hostname"}) {
    CAPTURE(cmd);
    const auto bad = run_binary(cmd);
    CHECK(bad.status == 2);
    CHECK(count_lines(bad.err) == 1);
    CHECK(bad.out.empty());
  }
  fs::remove(p);
}

TEST_CASE("share sweep with a measured machine: its this-machine columns use the file's figures") {
  const fs::path p = write_file("share.dat", kMachineDat);
  const auto presets = presets_with_machine(p.string());
  const DatTable t = share_sweep("B=2,S=4,M=8,H=32", 2, &presets);
  std::size_t block = t.blocks.size();
  for (std::size_t i = 0; i < t.blocks.size(); ++i)
    if (t.blocks[i].title.rfind("pairwise:", 0) == 0) block = i;
  REQUIRE(block < t.blocks.size());
  // pairwise on 2 devices, forward: one AllReduce of y [2,4,8] = 64 doubles = 512 B; 4096 FLOPs per device.
  const double comm = 2 * 2e-6 + 512 / 4e9 + 256 / 10e9, compute = 4096 / 20e9;
  CHECK(t.number(block, 0, "this-machine_fwd_comm_ms") == doctest::Approx(comm * 1e3).epsilon(1e-5));
  CHECK(t.number(block, 0, "this-machine_fwd_compute_ms") == doctest::Approx(compute * 1e3).epsilon(1e-5));
  fs::remove(p);
}
