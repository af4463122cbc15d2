#include "harness/cost/cost.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"

namespace shardlab {

// Where each preset's launch comes from. NCCL prices a call as a base latency per algorithm and
// protocol, plus a latency per ring step, plus bytes over bandwidth (src/graph/tuning.cc); PyTorch
// DTensor's cost model carries the same base term. TPUs run their collectives as ops inside one
// compiled XLA program, with no call of its own to launch.
#define NCCL_LAUNCH                                                                                          \
  "Launch 6.6 us a collective call: NCCL 2.30.7's cost model, src/graph/tuning.cc, baseLatencies of Ring/LL " \
  "(the protocol of small messages), which PyTorch DTensor's cost model "                                     \
  "(torch/distributed/tensor/_collective_utils.py, allreduce_cost) adds to every collective as its base latency."
#define TPU_LAUNCH                                                                                              \
  "Launch 0: XLA compiles a step's collectives into the program the TPU runs, so no call launches them one by " \
  "one; the scaling book (part 3, 'A note on ICI latency') models their latency per hop only"

const std::vector<Hardware>& hardware_presets() {
  // name, description, source, alpha (s), launch (s), link B/s one way, reduce B/s, FLOP/s, bytes per element
  static const std::vector<Hardware> presets = {
      {"tpu-v2", "one TensorCore of a TPU v2-8 (the article's machine, article 001)",
       "Jouppi et al., A Domain-Specific Supercomputer for Training Deep Neural Networks, CACM 63(7) 2020: "
       "4 ICI links of 496 Gbit/s (62 GB/s one way) per chip, 2D torus (a v2 pod's 16x16 torus wraps; the "
       "axes of a v2-8 board do not); Google Cloud TPU docs: 180 TFLOP/s bf16 "
       "per v2-8 board of 8 TensorCores (22.5 TFLOP/s each, one JAX device); latency ~1 us and on-chip "
       "reduction at 10x the link rate assumed. " TPU_LAUNCH,
       1e-6, 0, 62e9, 62e9 * 10, 22.5e12, 4, Topology::torus, 2, 16},
      {"tpu-v4", "TPU v4 chip, one ICI link of a 3D torus",
       "Google TPU v4 system architecture page and the JAX scaling book: ~45 GB/s per ICI link one way, "
       "275 TFLOP/s bf16 per chip, 3D torus with wraparound on axes that span 4x4x4 cubes (the book, part 2); latency ~1 us and reduction at 10x the link rate assumed. " TPU_LAUNCH,
       1e-6, 0, 45e9, 45e9 * 10, 275e12, 4, Topology::torus, 3, 4},
      {"tpu-v5e", "TPU v5e chip, one ICI link of a 2D torus",
       "the JAX scaling book, part 2 (TPUs): 4.5e10 B/s per ICI link one way, 1.97e14 bf16 FLOP/s per chip, "
       "~1 us per hop, wraparound links only on an axis of 16 chips; reduction at 10x the link rate assumed. " TPU_LAUNCH,
       1e-6, 0, 45e9, 45e9 * 10, 197e12, 4, Topology::torus, 2, 16},
      {"nvlink-a100", "8x A100 in one host over NVLink 3 / NVSwitch",
       "NVIDIA A100 datasheet: 600 GB/s NVLink total (300 GB/s each way), 312 TFLOP/s bf16 dense; "
       "reduction at 10x the link rate assumed. " NCCL_LAUNCH " Alpha 0.6 us: the same table's per-step "
       "latency of a ring over NVLink (hwLatencies, NVLINK, Ring/LL), DTensor's mesh_dim_latency within a host",
       0.6e-6, 6.6e-6, 300e9, 300e9 * 10, 312e12, 4, Topology::switched, 0, 0},
      {"ethernet-100g", "A100 hosts linked by 100 Gb/s Ethernet",
       "100 Gb/s = 12.5 GB/s line rate; ~20 us per message assumed for a TCP/RoCE hop (NCCL's model gives "
       "2.7 us a step over an InfiniBand/RoCE network, hwLatencies NET Ring/LL, DTensor's inter-host latency); "
       "A100 compute; reduction at 300 GB/s assumed. " NCCL_LAUNCH,
       20e-6, 6.6e-6, 12.5e9, 300e9, 312e12, 4, Topology::switched, 0, 0},
      {"this-machine", "2 MPICH processes on this 2-core machine (one host, ch4:ucx), float64",
       "2026-11-23 03:25 UTC, this 2-core AMD EPYC VM (load average 1.0), measured with MPICH 4.0.2 ch4:ucx, "
       "OpenBLAS 0.3.21 (Haswell kernels), one BLAS thread per process, freed memory kept (core/memory.hpp). "
       "`mpiexec -n 2 build/bin/shardlab sweep --what machine --backend mpi`, three runs, the middle one: alpha "
       "1.98 us and link 4.46 GB/s fitted to our ring all_reduce from 8 B to 32 MiB (runs gave 1.97-2.00 us, "
       "4.44-4.83 GB/s); the ring's reduction loop 26.2 GB/s; 512x512 float64 GEMM 51.7 GFLOP/s. The fit misses "
       "by up to 81-82%: small messages cost more than one alpha, MPICH changes protocol at 8 KiB, and busbw "
       "falls as buffers leave the cache. Runs differ more than three runs suggest: 25 minutes later the same "
       "command here fitted 0.94 us and 6.76 GB/s, and on 2026-11-22 (maybe on another VM) 0.96 us and 7.47 "
       "GB/s. That fit was one line through every size; the sweep now fits the rate from 512 KiB up and alpha "
       "from the smaller sizes (fit_link), which gave 10.4-10.9 us and 7.8-9.5 GB/s in three runs on "
       "2026-11-27. Measure yours and pass it with --machine (harness/cost/machine.hpp). Launch 0: every fit above "
       "timed all_reduce alone, one step count, which cannot tell a call's fixed cost from its steps' (all of it "
       "is in alpha); the sweep now times all_gather and reduce_scatter beside it and fits launch apart. Four runs of "
       "that fit on 2026-11-28, with other builds sharing the 2 cores (GEMM at 8-9 GFLOP/s), gave launch 3.8-4.5 us and "
       "alpha 0.6-3.3 us: remeasure on a quiet machine before taking either",
       1.98e-6, 0, 4.46e9, 26.2e9, 51.7e9, 8, Topology::switched, 0, 0},
  };
  return presets;
}
#undef NCCL_LAUNCH
#undef TPU_LAUNCH

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
  if (op == "collective_permute") return {1, steps, n, 0};  // one block to one device: a + n b
  if (op == "all_gather" || op == "all_to_all") return {1, steps, n * frac, 0};
  if (op == "reduce_scatter") return {1, steps, n * frac, n * frac};
  if (algorithm == Algorithm::ring) return {1, steps, 2 * n * frac, n * frac};  // all_reduce = RS + AG
  return {1, steps, n * steps, n * steps};  // recursive doubling all_reduce: the whole vector each step
}

double latency_seconds(double calls, double steps, const Hardware& hw) { return calls * hw.launch + steps * hw.alpha; }

double bandwidth_seconds(double link_bytes, double reduce_bytes, const Hardware& hw) {
  return link_bytes / hw.bytes_per_s + reduce_bytes / hw.reduce_bytes_per_s;
}

double collective_seconds(const std::string& op, Algorithm algorithm, int p, double n, const Hardware& hw) {
  const CollectiveTerms t = collective_terms(op, algorithm, p, n);
  return latency_seconds(t.calls, t.steps, hw) + bandwidth_seconds(t.link_bytes, t.reduce_bytes, hw);
}

double ring_faster_above_bytes(const std::string& op, int p, const Hardware& hw) {
  // Both times are A + B n; ring wins above (A_ring - A_doubling) / (B_doubling - B_ring). The terms
  // are linear in n, so B comes from the terms at n = 1 byte, exactly (no difference of times). Both
  // pay one launch, which cancels.
  auto line = [&](Algorithm a) {
    const CollectiveTerms t = collective_terms(op, a, p, 1.0);
    return std::pair<double, double>{latency_seconds(t.calls, t.steps, hw), bandwidth_seconds(t.link_bytes, t.reduce_bytes, hw)};
  };
  const auto [ring_a, ring_b] = line(Algorithm::ring);
  const auto [dbl_a, dbl_b] = line(Algorithm::recursive_doubling);
  if (ring_a <= dbl_a && ring_b <= dbl_b) return 0;
  if (ring_b >= dbl_b) return std::numeric_limits<double>::infinity();
  return std::max(0.0, (ring_a - dbl_a) / (dbl_b - ring_b));
}

namespace {

// One measured size of one collective; y is its time less its reduction at the given rate.
struct Point {
  double n, t, link, y;
};
// One collective's points, sorted by size; the rate is fitted to pts[from..].
struct Series {
  std::vector<Point> pts;
  std::size_t from = 0;
  double calls = 0, steps = 0;
  double latency = 0;  // its time beyond its bytes at the fitted rate
};

double middle_value(std::vector<double> v) {  // the median (the upper one of an even count)
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

Series series_of(const Timings& c, double reduce_bytes_per_s) {
  if (c.n_bytes.size() != c.seconds.size())
    throw Error(ErrorKind::unsupported, "fit_link: " + std::to_string(c.n_bytes.size()) + " sizes but " +
                                            std::to_string(c.seconds.size()) + " times");
  Series s;
  for (std::size_t i = 0; i < c.n_bytes.size(); ++i) {
    if (!(c.seconds[i] > 0)) continue;
    const CollectiveTerms t = collective_terms(c.op, c.algorithm, c.p, c.n_bytes[i]);
    s.calls = t.calls;
    s.steps = t.steps;
    s.pts.push_back({c.n_bytes[i], c.seconds[i], t.link_bytes, c.seconds[i] - t.reduce_bytes / reduce_bytes_per_s});
  }
  std::sort(s.pts.begin(), s.pts.end(), [](const Point& x, const Point& y) { return x.n < y.n; });
  std::vector<double> distinct;
  for (const auto& q : s.pts)
    if (distinct.empty() || distinct.back() != q.n) distinct.push_back(q.n);
  if (distinct.size() < 2 || !(s.steps > 0))
    throw Error(ErrorKind::unsupported, "fitting alpha and the link rate needs timings at two or more sizes");
  // The large sizes: at least the two largest, and every size down to 1/64 of the largest.
  const double lowest = std::min(distinct.back() / 64, distinct[distinct.size() - 2]);
  while (s.pts[s.from].n < lowest) ++s.from;
  return s;
}

}  // namespace

LinkFit fit_link(const std::vector<Timings>& collectives, double reduce_bytes_per_s) {
  // Two regimes, fitted apart. The link rate is the slope of the large messages: from each
  // collective's largest size down to 1/64 of it. The latency is what the smaller ones take beyond
  // their bytes at that rate. One line through every size let a 8-byte message weigh as much as a
  // 32 MiB one: on a link shaped by tc, whose burst sends small messages faster than the rate, the
  // fitted rate came out 26% above tc's.
  std::vector<Series> all;
  for (const auto& c : collectives) all.push_back(series_of(c, reduce_bytes_per_s));
  if (all.empty()) throw Error(ErrorKind::unsupported, "fitting alpha and the link rate needs timings at two or more sizes");
  // The slope: least squares with weights 1/t^2 (relative error), each collective about its own
  // weighted means, so that each has an intercept (its latency) of its own.
  double sxx = 0, sxy = 0;
  std::vector<std::pair<double, double>> means;  // per collective: link, y
  for (const auto& s : all) {
    double w = 0, mx = 0, my = 0;
    for (std::size_t i = s.from; i < s.pts.size(); ++i) {
      const double wi = 1 / (s.pts[i].t * s.pts[i].t);
      w += wi, mx += wi * s.pts[i].link, my += wi * s.pts[i].y;
    }
    mx /= w, my /= w;
    means.push_back({mx, my});
    for (std::size_t i = s.from; i < s.pts.size(); ++i) {
      const double wi = 1 / (s.pts[i].t * s.pts[i].t), dx = s.pts[i].link - mx;
      sxx += wi * dx * dx, sxy += wi * dx * (s.pts[i].y - my);
    }
  }
  if (!(sxx > 0)) throw Error(ErrorKind::unsupported, "fitting alpha and the link rate needs timings at two or more sizes");
  const double b = sxy / sxx;
  if (!(b > 0)) throw Error(ErrorKind::unsupported, "the timings do not fit alpha-beta: time does not grow with message size");
  LinkFit f;
  f.bytes_per_s = 1 / b;
  // Each collective's latency: the median over its smaller sizes, else its intercept.
  std::vector<double> per_step;  // every smaller size's latency per step, for one step count
  for (std::size_t k = 0; k < all.size(); ++k) {
    Series& s = all[k];
    f.rate_from_bytes = std::max(f.rate_from_bytes, s.pts[s.from].n);
    f.rate_points += s.pts.size() - s.from;
    std::vector<double> small;
    for (std::size_t i = 0; i < s.from; ++i) small.push_back(s.pts[i].y - s.pts[i].link * b);
    s.latency = small.empty() ? means[k].second - means[k].first * b : middle_value(small);
    if (small.empty()) small.push_back(s.latency);
    for (double l : small) per_step.push_back(l / s.steps);
  }
  // Launch and alpha: latency = launch + steps alpha through the collectives, least squares.
  double n = 0, mk = 0, ml = 0;
  for (const auto& s : all) n += 1, mk += s.steps, ml += s.latency;
  mk /= n, ml /= n;
  double skk = 0, skl = 0, sk2 = 0, skl0 = 0;
  for (const auto& s : all) {
    skk += (s.steps - mk) * (s.steps - mk), skl += (s.steps - mk) * (s.latency - ml);
    sk2 += s.steps * s.steps, skl0 += s.steps * s.latency;
  }
  f.launch_fitted = skk > 1e-12 * sk2;
  if (!f.launch_fitted) {
    f.alpha = std::max(middle_value(per_step), 0.0);  // one step count: all of it per step, launch 0
  } else {
    f.alpha = skl / skk;
    f.launch = ml - f.alpha * mk;
    if (f.launch < 0) f.launch = 0, f.alpha = skl0 / sk2;  // through the origin
    if (f.alpha < 0) f.alpha = 0, f.launch = ml;
    f.launch = std::max(f.launch, 0.0), f.alpha = std::max(f.alpha, 0.0);
  }
  Hardware hw;
  hw.launch = f.launch;
  hw.alpha = f.alpha;
  hw.bytes_per_s = f.bytes_per_s;
  hw.reduce_bytes_per_s = reduce_bytes_per_s;
  for (std::size_t k = 0; k < all.size(); ++k)
    for (std::size_t i = 0; i < all[k].pts.size(); ++i) {
      ++f.points;
      const Point& q = all[k].pts[i];
      const double err = std::abs(collective_seconds(collectives[k].op, collectives[k].algorithm, collectives[k].p, q.n, hw) - q.t) / q.t;
      f.max_rel_err = std::max(f.max_rel_err, err);
      if (i >= all[k].from) f.max_rel_err_rate = std::max(f.max_rel_err_rate, err);
    }
  return f;
}

LinkFit fit_link(const std::string& op, Algorithm algorithm, int p, const std::vector<double>& n_bytes,
                 const std::vector<double>& seconds, double reduce_bytes_per_s) {
  return fit_link(std::vector<Timings>{{op, algorithm, p, n_bytes, seconds}}, reduce_bytes_per_s);
}

double compute_seconds(double flops, const Hardware& hw) { return flops / hw.flops_per_s; }

}  // namespace shardlab
