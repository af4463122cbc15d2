#include "harness/cost/cost.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"

namespace shardlab {

const std::vector<Hardware>& hardware_presets() {
  // name, description, source, alpha (s), link B/s one way, reduce B/s, FLOP/s, bytes per element
  static const std::vector<Hardware> presets = {
      {"tpu-v2", "one TensorCore of a TPU v2-8 (the article's machine, article 001)",
       "Jouppi et al., A Domain-Specific Supercomputer for Training Deep Neural Networks, CACM 63(7) 2020: "
       "4 ICI links of 496 Gbit/s (62 GB/s one way) per chip, 2D torus (a v2 pod's 16x16 torus wraps; the "
       "axes of a v2-8 board do not); Google Cloud TPU docs: 180 TFLOP/s bf16 "
       "per v2-8 board of 8 TensorCores (22.5 TFLOP/s each, one JAX device); latency ~1 us and on-chip "
       "reduction at 10x the link rate assumed",
       1e-6, 62e9, 62e9 * 10, 22.5e12, 4, Topology::torus, 2, 16},
      {"tpu-v4", "TPU v4 chip, one ICI link of a 3D torus",
       "Google TPU v4 system architecture page and the JAX scaling book: ~45 GB/s per ICI link one way, "
       "275 TFLOP/s bf16 per chip, 3D torus with wraparound on axes that span 4x4x4 cubes (the book, part 2); latency ~1 us and reduction at 10x the link rate assumed",
       1e-6, 45e9, 45e9 * 10, 275e12, 4, Topology::torus, 3, 4},
      {"tpu-v5e", "TPU v5e chip, one ICI link of a 2D torus",
       "the JAX scaling book, part 2 (TPUs): 4.5e10 B/s per ICI link one way, 1.97e14 bf16 FLOP/s per chip, "
       "~1 us per hop, wraparound links only on an axis of 16 chips; reduction at 10x the link rate assumed",
       1e-6, 45e9, 45e9 * 10, 197e12, 4, Topology::torus, 2, 16},
      {"nvlink-a100", "8x A100 in one host over NVLink 3 / NVSwitch",
       "NVIDIA A100 datasheet: 600 GB/s NVLink total (300 GB/s each way), 312 TFLOP/s bf16 dense; "
       "NCCL small-message latency ~5 us and reduction at 10x the link rate assumed",
       5e-6, 300e9, 300e9 * 10, 312e12, 4, Topology::switched, 0, 0},
      {"ethernet-100g", "A100 hosts linked by 100 Gb/s Ethernet",
       "100 Gb/s = 12.5 GB/s line rate; ~20 us per message assumed for a TCP/RoCE hop; A100 compute; "
       "reduction at 300 GB/s assumed",
       20e-6, 12.5e9, 300e9, 312e12, 4, Topology::switched, 0, 0},
      {"this-machine", "2 MPICH processes on this 2-core machine (one host, ch4:ucx), float64",
       "measured 2026-11-23 03:25 UTC on this 2-core AMD EPYC VM (load average 1.0): MPICH 4.0.2 ch4:ucx, "
       "OpenBLAS 0.3.21 (Haswell kernels), one BLAS thread per process, freed memory kept (core/memory.hpp). "
       "`mpiexec -n 2 build/bin/shardlab sweep --what machine --backend mpi`, three runs, the middle one: alpha "
       "1.98 us and link 4.46 GB/s fitted to our ring all_reduce from 8 B to 32 MiB (runs gave 1.97-2.00 us, "
       "4.44-4.83 GB/s); the ring's reduction loop 26.2 GB/s; 512x512 float64 GEMM 51.7 GFLOP/s. The fit misses "
       "by up to 81-82%: small messages cost more than one alpha, MPICH changes protocol at 8 KiB, and busbw "
       "falls as buffers leave the cache. Runs differ more than three runs suggest: 25 minutes later the same "
       "command here fitted 0.94 us and 6.76 GB/s, and on 2026-11-22 (maybe on another VM) 0.96 us and 7.47 "
       "GB/s. That fit was one line through every size; the sweep now fits the rate from 512 KiB up and alpha "
       "from the smaller sizes (fit_link), which gave 10.4-10.9 us and 7.8-9.5 GB/s in three runs on "
       "2026-11-27. Measure yours and pass it with --machine (harness/cost/machine.hpp)",
       1.98e-6, 4.46e9, 26.2e9, 51.7e9, 8, Topology::switched, 0, 0},
  };
  return presets;
}

const Hardware& hardware_preset(const std::string& name) { return hardware_preset(name, hardware_presets()); }

const Hardware& hardware_preset(const std::string& name, const std::vector<Hardware>& presets) {
  std::string known;
  for (const auto& h : presets) {
    if (h.name == name) return h;
    known += (known.empty() ? "" : ", ") + h.name;
  }
  throw Error(ErrorKind::parse, "hardware preset '" + name + "' is not known; choose one of " + known);
}

std::string topology_name(Topology t) {
  switch (t) {
    case Topology::one_way_ring: return "one-way ring";
    case Topology::torus: return "torus";
    case Topology::switched: return "switch";
  }
  return "?";
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

double collective_steps(const std::string& op_name, Algorithm algorithm, int p) {
  const std::string op = op_name == "all_reduce_max" ? "all_reduce" : op_name;  // priced alike
  if (p <= 1) return 0;
  if (op == "collective_permute") return 1;
  if (algorithm == Algorithm::recursive_doubling) return log2_exact(p, op);
  if (op == "all_reduce") return 2.0 * (p - 1);
  return p - 1;
}

CollectiveTerms collective_terms(const std::string& op_name, Algorithm algorithm, int p, double n) {
  const std::string op = op_name == "all_reduce_max" ? "all_reduce" : op_name;  // priced alike
  const bool known = algorithm == Algorithm::pairwise ? op == "all_to_all" || op == "collective_permute"
                                                      : op == "all_gather" || op == "reduce_scatter" || op == "all_reduce";
  if (!known) throw Error(ErrorKind::unsupported, "the cost model has no " + algorithm_name(algorithm) + " " + op);
  if (p <= 1) return {};
  const double frac = (p - 1.0) / p, steps = collective_steps(op, algorithm, p);
  if (op == "collective_permute") return {steps, n, 0};  // one block to one device: a + n b
  if (op == "all_gather" || op == "all_to_all") return {steps, n * frac, 0};
  if (op == "reduce_scatter") return {steps, n * frac, n * frac};
  if (algorithm == Algorithm::ring) return {steps, 2 * n * frac, n * frac};  // all_reduce = RS + AG
  return {steps, n * steps, n * steps};  // recursive doubling all_reduce: the whole vector each step
}

double collective_seconds(const std::string& op, Algorithm algorithm, int p, double n, const Hardware& hw) {
  const CollectiveTerms t = collective_terms(op, algorithm, p, n);
  return t.steps * hw.alpha + t.link_bytes / hw.bytes_per_s + t.reduce_bytes / hw.reduce_bytes_per_s;
}

double ring_faster_above_bytes(const std::string& op, int p, const Hardware& hw) {
  // Both times are A + B n; ring wins above (A_ring - A_doubling) / (B_doubling - B_ring). The terms
  // are linear in n, so B comes from the terms at n = 1 byte, exactly (no difference of times).
  auto line = [&](Algorithm a) {
    const CollectiveTerms t = collective_terms(op, a, p, 1.0);
    return std::pair<double, double>{t.steps * hw.alpha, t.link_bytes / hw.bytes_per_s + t.reduce_bytes / hw.reduce_bytes_per_s};
  };
  const auto [ring_a, ring_b] = line(Algorithm::ring);
  const auto [dbl_a, dbl_b] = line(Algorithm::recursive_doubling);
  if (ring_a <= dbl_a && ring_b <= dbl_b) return 0;
  if (ring_b >= dbl_b) return std::numeric_limits<double>::infinity();
  return std::max(0.0, (ring_a - dbl_a) / (dbl_b - ring_b));
}

namespace {
// Weighted least squares (weights 1/t^2) of y = steps a + link b over points [from, to) of the
// sorted sizes; false when the two terms cannot be told apart there.
struct Point {
  double n, t, steps, link, y;
};
bool line_fit(const std::vector<Point>& p, std::size_t from, double& a, double& b) {
  double suu = 0, suv = 0, svv = 0, sut = 0, svt = 0;
  for (std::size_t i = from; i < p.size(); ++i) {
    const double w = 1 / (p[i].t * p[i].t);
    suu += w * p[i].steps * p[i].steps;
    suv += w * p[i].steps * p[i].link;
    svv += w * p[i].link * p[i].link;
    sut += w * p[i].steps * p[i].y;
    svt += w * p[i].link * p[i].y;
  }
  const double det = suu * svv - suv * suv;
  if (!(det > 0)) return false;
  a = (sut * svv - svt * suv) / det;
  b = (suu * svt - suv * sut) / det;
  return true;
}
}  // namespace

LinkFit fit_link(const std::string& op, Algorithm algorithm, int p, const std::vector<double>& n_bytes,
                 const std::vector<double>& seconds, double reduce_bytes_per_s) {
  if (n_bytes.size() != seconds.size())
    throw Error(ErrorKind::unsupported, "fit_link: " + std::to_string(n_bytes.size()) + " sizes but " +
                                            std::to_string(seconds.size()) + " times");
  // Two regimes, fitted apart. The link rate is the slope of the large messages: from the largest
  // size down to 1/64 of it. Alpha is what the smaller ones take beyond their bytes at that rate
  // (the median per step). One line through every size let a 8-byte message weigh as much as a
  // 32 MiB one: on a link shaped by tc, whose burst sends small messages faster than the rate, the
  // fitted rate came out 26% above tc's.
  std::vector<Point> pts;
  for (std::size_t i = 0; i < n_bytes.size(); ++i) {
    if (!(seconds[i] > 0)) continue;
    const CollectiveTerms t = collective_terms(op, algorithm, p, n_bytes[i]);
    pts.push_back({n_bytes[i], seconds[i], t.steps, t.link_bytes, seconds[i] - t.reduce_bytes / reduce_bytes_per_s});
  }
  std::sort(pts.begin(), pts.end(), [](const Point& x, const Point& y) { return x.n < y.n; });
  std::vector<double> distinct;
  for (const auto& q : pts)
    if (distinct.empty() || distinct.back() != q.n) distinct.push_back(q.n);
  if (distinct.size() < 2)
    throw Error(ErrorKind::unsupported, "fitting alpha and the link rate needs timings at two or more sizes");
  // The large sizes: at least the two largest, and every size down to 1/64 of the largest.
  const double lowest = std::min(distinct.back() / 64, distinct[distinct.size() - 2]);
  std::size_t from = 0;
  while (pts[from].n < lowest) ++from;
  double a = 0, b = 0;
  if (!line_fit(pts, from, a, b))
    throw Error(ErrorKind::unsupported, "fitting alpha and the link rate needs timings at two or more sizes");
  if (!(b > 0))
    throw Error(ErrorKind::unsupported, "the timings do not fit alpha-beta: time does not grow with message size");
  LinkFit f;
  f.bytes_per_s = 1 / b;
  f.rate_from_bytes = pts[from].n;
  f.rate_points = pts.size() - from;
  std::vector<double> per_step;
  for (std::size_t i = 0; i < from; ++i) per_step.push_back((pts[i].y - pts[i].link * b) / pts[i].steps);
  if (per_step.empty()) {
    f.alpha = std::max(a, 0.0);
  } else {
    std::nth_element(per_step.begin(), per_step.begin() + per_step.size() / 2, per_step.end());
    f.alpha = std::max(per_step[per_step.size() / 2], 0.0);
  }
  Hardware hw;
  hw.alpha = f.alpha;
  hw.bytes_per_s = f.bytes_per_s;
  hw.reduce_bytes_per_s = reduce_bytes_per_s;
  for (std::size_t i = 0; i < pts.size(); ++i) {
    ++f.points;
    const double err = std::abs(collective_seconds(op, algorithm, p, pts[i].n, hw) - pts[i].t) / pts[i].t;
    f.max_rel_err = std::max(f.max_rel_err, err);
    if (i >= from) f.max_rel_err_rate = std::max(f.max_rel_err_rate, err);
  }
  return f;
}

double compute_seconds(double flops, const Hardware& hw) { return flops / hw.flops_per_s; }

}  // namespace shardlab
