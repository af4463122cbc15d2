// Sweeps for plots (`shardlab sweep`): pure functions that build plot-ready tables, written as
// .dat files in the nccl-tests way: `#` rows say what the table is, the sizes, the units and the
// columns; then whitespace-separated rows; gnuplot blocks (index 0, 1, ...) are separated by two
// blank lines. Missing values are "-" (plots/*.gp say `set datafile missing "-"`).
//
//   bytes_per_device.dat   plan_ffn's predicted bytes sent per device, every FFN strategy, against
//                          device count (1-D strategies on D=n, gspmd on 2-D meshes 1x1 ... 8x8)
//   comm_share.dat         modeled communication share of an FFN step at the article's sizes, per
//                          strategy (block), mesh (row) and hardware preset (columns)
//   memory_per_device.dat  plan_ffn's peak and stored bytes per device, and the unsharded figure
//   busbw.dat              measured bus bandwidth, ours against MPICH's, per collective (block),
//                          beside the this-machine preset's modeled busbw and an alpha-beta line
//                          fitted to the same run's all_reduce (machines differ from the preset)
//
// Nothing here allocates the tensors it describes: bytes, FLOPs and memory come from plan_ffn.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace shardlab {

struct BenchResult;  // harness/bench/bench.hpp
struct Hardware;     // harness/cost/cost.hpp
struct LinkFit;      // harness/cost/cost.hpp

struct DatBlock {
  std::string title;                          // "# block 0: gspmd" above its rows
  std::vector<std::vector<std::string>> rows;  // cells; numbers as text, "-" when missing
};

struct DatTable {
  std::string name;                  // file stem: "bytes_per_device" -> bytes_per_device.dat
  std::vector<std::string> notes;    // the "# ..." lines above the column names
  std::vector<std::string> columns;  // names with units: "devices", "gspmd_B", "tpu-v2_fwd_pct"
  std::vector<DatBlock> blocks;

  std::string text() const;  // the whole .dat file
  std::size_t column(const std::string& name) const;  // index; Error(parse) when missing
  // The cell as a number (tests): NaN for "-". Error(parse) for a bad block, row or column.
  double number(std::size_t block, std::size_t row, const std::string& column) const;
};

// A cell: the number in `format`, "-" for NaN (missing); a count.
std::string dat_number(double v, const char* format = "%.6g");
std::string dat_integer(std::size_t v);

// Device counts 1, 2, 4, ... up to max_devices, and the 2-D mesh of each for gspmd:
// 1x1, 1x2, 2x2, 2x4, 4x4 ... (Y grows first, as the article's 2x4; X = batch, Y = embed/hidden).
std::vector<int> sweep_device_counts(int max_devices);
std::string two_axis_mesh(int devices);  // 8 -> "X=2,Y=4"

// `dims` as parse_ffn_dims takes it. Bytes of forward+backward and of the forward alone.
DatTable bytes_sweep(const std::string& dims = "B=64,S=8,M=256,H=1024", int max_devices = 64,
                     DType dtype = DType::float32);
// Forward+backward (a training step): peak and stored bytes per device, and unsharded.
DatTable memory_sweep(const std::string& dims = "B=64,S=8,M=256,H=1024", int max_devices = 64,
                      DType dtype = DType::float32);

// Memory per device of plain DP and ZeRO 1-3 (harness/models/zero.hpp) for `params` parameters
// with mixed-precision Adam, devices 1, 2, 4 ... max_devices; GB (1e9 bytes) as the ZeRO paper.
DatTable zero_sweep(double params = 7.5e9, int max_devices = 1024);

// GPipe pipelines run on the sim backend for P = 2, 4, 8 stages and m = 1 ... 32 micro-batches:
// the bubble measured on the logical clock of the order the devices ran, beside (P-1)/(m+P-1).
DatTable bubble_sweep();

// Strategies x meshes (2 ... max_devices devices) x presets at `dims` (default the article's).
// `presets`: hardware_presets(), or presets_with_machine's (harness/cost/machine.hpp).
DatTable share_sweep(const std::string& dims = "article", int max_devices = 64,
                     const std::vector<Hardware>* presets = nullptr);

// busbw per collective from a benchmark run, or from its CSV (bench_csv's format).
// The model line is `machine`'s (default: the stored this-machine preset). The fit line is launch,
// alpha and the link rate fitted to the run's own collectives (fit_bench_link); `fit`, when given, gets it
// (empty when the run cannot be fitted).
DatTable busbw_table(const BenchResult& result, const std::string& source, const Hardware* machine = nullptr,
                     std::optional<LinkFit>* fit = nullptr);
BenchResult parse_bench_csv(const std::string& text, const std::string& path);

// Rates of this machine's float64 arithmetic, for the this-machine preset: the best of `reps`
// timings of a square GEMM through core/einsum.hpp matmul and of the ring's reduction loop
// (acc[i] += in[i]) over `reduce_bytes` of doubles.
struct MachineRates {
  double gemm_flops_per_s = 0, reduce_bytes_per_s = 0;
  std::size_t gemm_n = 0, reduce_bytes = 0;
};
MachineRates measure_machine_rates(std::size_t gemm_n = 512, std::size_t reduce_bytes = 8u << 20, int reps = 20);
// The link of the this-machine preset: launch, alpha and link rate fitted (fit_link) to a
// benchmark's timings of our ring all_reduce, all_gather and reduce_scatter (2(p-1) steps against
// p-1, so launch and alpha come apart), with the measured reduction rate; a collective with fewer
// than two sizes is left out. Error(unsupported) when none has two sizes.
LinkFit fit_bench_link(const BenchResult& bench, double reduce_bytes_per_s);
// What a fit says of launch: fitted apart from alpha, or folded into it (one step count).
std::string launch_note(const LinkFit& fit);
// machine.dat: the rates, and the fitted link when there is one (else '-': the sim backend has no link).
DatTable machine_table(const MachineRates& rates, const LinkFit* link = nullptr, const std::string& link_source = "");

// Writes each table as <dir>/<name>.dat: all go to temporary files first, and are renamed only
// when every one was written; on failure none is left behind. Error(io) names the file.
// Returns the paths written.
std::vector<std::string> write_dat_files(const std::string& dir, const std::vector<DatTable>& tables);

}  // namespace shardlab
