#include "harness/cost.hpp"

#include <cmath>

#include "core/error.hpp"

namespace shardlab {

const std::vector<Hardware>& hardware_presets() {
  // name, description, source, alpha (s), link B/s one way, reduce B/s, FLOP/s, bytes per element
  static const std::vector<Hardware> presets = {
      {"tpu-v2", "one TensorCore of a TPU v2-8 (the article's machine, seed 001)",
       "Jouppi et al., A Domain-Specific Supercomputer for Training Deep Neural Networks, CACM 63(7) 2020: "
       "4 ICI links of 496 Gbit/s (62 GB/s one way) per chip, 2D torus; Google Cloud TPU docs: 180 TFLOP/s bf16 "
       "per v2-8 board of 8 TensorCores (22.5 TFLOP/s each, one JAX device); latency ~1 us and on-chip "
       "reduction at 10x the link rate assumed",
       1e-6, 62e9, 62e9 * 10, 22.5e12, 4},
      {"tpu-v4", "TPU v4 chip, one ICI link of a 3D torus",
       "Google TPU v4 system architecture page and the JAX scaling book: ~45 GB/s per ICI link one way, "
       "275 TFLOP/s bf16 per chip; latency ~1 us and reduction at 10x the link rate assumed",
       1e-6, 45e9, 45e9 * 10, 275e12, 4},
      {"nvlink-a100", "8x A100 in one host over NVLink 3 / NVSwitch",
       "NVIDIA A100 datasheet: 600 GB/s NVLink total (300 GB/s each way), 312 TFLOP/s bf16 dense; "
       "NCCL small-message latency ~5 us and reduction at 10x the link rate assumed",
       5e-6, 300e9, 300e9 * 10, 312e12, 4},
      {"ethernet-100g", "A100 hosts linked by 100 Gb/s Ethernet",
       "100 Gb/s = 12.5 GB/s line rate; ~20 us per message assumed for a TCP/RoCE hop; A100 compute; "
       "reduction at 300 GB/s assumed",
       20e-6, 12.5e9, 300e9, 312e12, 4},
      {"this-machine", "2 MPICH processes on this 2-core machine (one host, ch4:ucx), float64",
       "measured 2026-11-22 (05:30-05:50 UTC) on this 2-core AMD EPYC VM (MPICH 4.0.2 ch4:ucx, OpenBLAS 0.3.21, "
       "one BLAS thread), best of 7 runs (rates: of 18) while concurrent builds loaded the machine (load average "
       "4-6). `mpiexec -n 2 build/bin/shardlab bench collectives --backend mpi --ops all_reduce,all_gather "
       "--min 8 --max 32M --factor 4` (median per call, build of commit c11adb1): all_reduce of 32 B in 4.0 us = "
       "2(p-1) alpha -> alpha 2.0 us; all_reduce busbw 1.035 GB/s at 32 MiB = 1/(beta + gamma/2) -> link "
       "1.08 GB/s (MPICH's own 1.00 GB/s; all_gather busbw only 0.48 GB/s at 8-32 MiB, ours and MPICH's alike). "
       "`build/bin/shardlab sweep --what machine`: the ring's reduction loop 12.6 GB/s over 8 MiB; 512x512 "
       "float64 GEMM 23.8 GFLOP/s",
       2.0e-6, 1.08e9, 12.6e9, 23.8e9, 8},
  };
  return presets;
}

const Hardware& hardware_preset(const std::string& name) {
  std::string known;
  for (const auto& h : hardware_presets()) {
    if (h.name == name) return h;
    known += (known.empty() ? "" : ", ") + h.name;
  }
  throw Error(ErrorKind::parse, "hardware preset '" + name + "' is not known; choose one of " + known);
}

std::string algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::ring: return "ring";
    case Algorithm::recursive_doubling: return "recursive_doubling";
    case Algorithm::pairwise: return "pairwise";
  }
  return "?";
}

namespace {
double log2_exact(int p, const std::string& op) {
  int k = 0;
  while ((1 << k) < p) ++k;
  if ((1 << k) != p)
    throw Error(ErrorKind::unsupported, "recursive doubling " + op + " needs a power-of-two group, not " +
                                            std::to_string(p));
  return k;
}
}  // namespace

double collective_steps(const std::string& op, Algorithm algorithm, int p) {
  if (p <= 1) return 0;
  if (algorithm == Algorithm::recursive_doubling) return log2_exact(p, op);
  if (op == "all_reduce") return 2.0 * (p - 1);
  return p - 1;
}

double collective_seconds(const std::string& op, Algorithm algorithm, int p, double n, const Hardware& hw) {
  if (p <= 1) return 0;
  const double a = hw.alpha, b = 1.0 / hw.bytes_per_s, g = 1.0 / hw.reduce_bytes_per_s;
  const double frac = (p - 1.0) / p;
  const double steps = collective_steps(op, algorithm, p);
  if (algorithm == Algorithm::ring) {
    if (op == "all_gather") return steps * a + n * frac * b;
    if (op == "reduce_scatter") return steps * a + n * frac * (b + g);
    if (op == "all_reduce") return steps * a + 2 * n * frac * b + n * frac * g;
  }
  if (algorithm == Algorithm::recursive_doubling) {
    if (op == "all_gather") return steps * a + n * frac * b;
    if (op == "reduce_scatter") return steps * a + n * frac * (b + g);
    if (op == "all_reduce") return steps * a + n * steps * (b + g);
  }
  if (algorithm == Algorithm::pairwise && op == "all_to_all") return steps * a + n * frac * b;
  throw Error(ErrorKind::unsupported, "the cost model has no " + algorithm_name(algorithm) + " " + op);
}

double compute_seconds(double flops, const Hardware& hw) { return flops / hw.flops_per_s; }

}  // namespace shardlab
