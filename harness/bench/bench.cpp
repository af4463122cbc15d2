#include "harness/bench/bench.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cctype>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <thread>

#include "collectives/collectives.hpp"
#include "collectives/mpi.hpp"
#include "collectives/runtime.hpp"
#include "core/blas.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/trace.hpp"
#include "core/mesh.hpp"
#include "core/text.hpp"
#include "core/table.hpp"
#include "harness/check/trace.hpp"
#include "harness/bench/calibrate.hpp"
#include "harness/cost/machine.hpp"
#include "core/write_file.hpp"

namespace shardlab {

namespace {

const std::vector<std::string> kOps = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"};

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// ---- inputs and expected values, from formulas (never from the code under test) ----
// Member p of a group of n; every value is a small integer, so every sum is exact.
//   all_reduce      in[i] = p + i%a              out[i] = n(n-1)/2 + n*(i%a)
//   all_gather      in[j] = p + j%13 (c = count/n of them)
//                   out[q*c + j] = q + j%13
//   reduce_scatter  in[i] = p + i%a (count)       out[j] = n(n-1)/2 + n*((p*c + j)%a)
//   all_to_all      in[i] = s*p + i%s             out[q*c + j] = s*q + (p*c + j)%s
// with a = 13 and s = 100 in float32 and float64 (exact far beyond any group here). bfloat16 holds
// integers exactly only up to 256, so there a = 5 and s = 16: every partial and final sum stays at
// most n(n-1)/2 + 4n, and every all_to_all value under 16n, both within 256 for n <= 15.
// MPICH's calls alternate between two inputs: variant v adds v to every input value, so v to every
// output value of all_gather and all_to_all and n*v to those of all_reduce and reduce_scatter
// (shift_of). A call that leaves its preallocated output untouched then shows the previous call's
// values, off by that shift: wrong, without refilling the output before each call. Ours returns a
// new tensor from every call and keeps variant 0: a second input of up to 16 MiB in a sim device
// thread's malloc arena would push our 16 MiB all_reduce past the arena's 64 MiB heap, and glibc
// would then map and fault in a new heap on every call (measured here: 6.5 ms -> 70-77 ms per call).
struct Pattern {
  std::size_t a = 13, s = 100;
};
Pattern pattern_of(DType t) { return t == DType::bfloat16 ? Pattern{5, 16} : Pattern{}; }

template <class T>
xt::xarray<T> bench_input(const std::string& op, int p, int n, std::size_t count, int variant, Pattern pat) {
  const std::size_t len = op == "all_gather" ? count / n : count;
  xt::xarray<T> t = xt::empty<T>(Shape{len});
  T* d = t.data();
  for (std::size_t i = 0; i < len; ++i)
    d[i] = element_cast<T>((op == "all_to_all"   ? double(pat.s) * p + double(i % pat.s)
                            : op == "all_gather" ? p + double(i % 13)
                                                 : p + double(i % pat.a)) +
                           variant);
  return t;
}

double shift_of(const std::string& op, int n, int variant) {
  return (op == "all_reduce" || op == "reduce_scatter" ? n : 1) * double(variant);
}

// Wrong elements among the `got` elements at `d` (a wrong length: every expected element is wrong);
// `perturb` is added to every expected value (the input variant's shift, and 1 for --perturb-expected).
// It runs after every timed call, so it walks the blocks with running remainders: no string compare,
// division or modulo per element. `!(a == b)`: NaN (a call that wrote nothing) counts as wrong.
template <class T>
std::size_t count_wrong(const std::string& op, int p, int n, std::size_t count, const T* d, std::size_t got,
                        double perturb, Pattern pat) {
  const std::size_t c = count / n, len = op == "reduce_scatter" ? c : count;
  if (got != len) return len;
  const double tri = n * (n - 1) / 2.0;
  std::size_t wrong = 0;
  if (op == "all_reduce" || op == "reduce_scatter") {  // tri + n * ((start + k) % a)
    std::size_t r = op == "all_reduce" ? 0 : (std::size_t(p) * c) % pat.a;
    for (std::size_t k = 0; k < len; ++k) {
      wrong += !(element_cast<double>(d[k]) == tri + n * double(r) + perturb);
      if (++r == pat.a) r = 0;
    }
    return wrong;
  }
  const bool gather = op == "all_gather";  // block q: q + j%13, or s*q + (p*c + j)%s
  for (std::size_t q = 0, k = 0; q < std::size_t(n); ++q) {
    const double base = (gather ? double(q) : double(pat.s) * double(q)) + perturb;
    const std::size_t m = gather ? 13 : pat.s;
    std::size_t r = gather ? 0 : (std::size_t(p) * c) % m;
    for (std::size_t j = 0; j < c; ++j, ++k) {
      wrong += !(element_cast<double>(d[k]) == base + double(r));
      if (++r == m) r = 0;
    }
  }
  return wrong;
}

// The one place the benchmark calls our collectives.
template <class T>
xt::xarray<T> call(const std::string& op, Device& dev, const xt::xarray<T>& in, const std::vector<std::string>& axes) {
  if (op == "all_reduce") return all_reduce(dev, in, axes, "bench");
  if (op == "all_gather") return all_gather(dev, in, axes, 0, "bench");
  if (op == "reduce_scatter") return reduce_scatter(dev, in, axes, 0, "bench");
  return all_to_all(dev, in, axes, 0, 0, "bench");
}

// The group meets before every timed call: n-1 ring steps of an 8-byte control message (after
// step s a member knows the s members before it have arrived). It waits like any exchange of the
// transport, so a failed or missing device stops it instead of hanging. Untimed in the calls'
// figures; returns its own seconds (the `sync` header line).
double meet(Device& dev, const Group& g) {
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t token = 0, got = 0;
  dev.transport().set_activity("the meeting before a timed call over " + join(g.axes, ","));
  for (int s = 0; s + 1 < g.size(); ++s)
    dev.transport().control_sendrecv(g, g.next(), &token, sizeof token, g.prev(), &got, sizeof got);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// memcpy's buffers: mapped apart from malloc and touched once. Taken from a device thread's malloc
// arena, two blocks of up to 2 x 16 MiB would crowd that arena's 64 MiB heap, and our
// collectives' own buffers would then be mapped and faulted in afresh on every call.
class Pages {
 public:
  explicit Pages(std::size_t bytes, unsigned char fill) : bytes_(std::max<std::size_t>(bytes, 1)) {
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<unsigned char*>(p);
    std::memset(data_, fill, bytes_);
  }
  ~Pages() { munmap(data_, bytes_); }
  Pages(const Pages&) = delete;
  Pages& operator=(const Pages&) = delete;
  unsigned char* data() { return data_; }

 private:
  std::size_t bytes_;
  unsigned char* data_ = nullptr;
};

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// What --statistic asks of a size's timed calls: their median, or (fastest) their minimum.
double summary(const std::vector<double>& v, bool fastest) {
  if (!fastest || v.empty()) return median(v);
  return *std::min_element(v.begin(), v.end());
}

// std::memcpy of `bytes` that another thread has just written (memset, untimed): what moving a
// device's data to another device's thread costs at least, the lines crossing between the cores'
// caches. As in a collective, the group's `devices` threads copy at once: each writes its own
// block, then (after all have) copies the next thread's block into its own buffer; a copy taken
// alone would get every core's share of the memory bandwidth, which no device of a collective
// gets. The slowest thread's copy each round: the median of `iters` rounds after 2 untimed, or the
// fastest (`fastest`, --statistic min).
double peer_memcpy_seconds(std::size_t bytes, int iters, int devices, bool fastest) {
  const int n = std::max(devices, 2);
  std::vector<std::unique_ptr<Pages>> src, dst;
  for (int i = 0; i < n; ++i) {
    src.push_back(std::make_unique<Pages>(bytes, 1));
    dst.push_back(std::make_unique<Pages>(bytes, 0));
  }
  const int rounds = iters + 2;
  std::atomic<int> arrived{0}, phase{0};
  auto barrier = [&] {  // every thread waits until all n have come (a generation counter)
    const int p = phase.load(std::memory_order_acquire);
    if (arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
      arrived.store(0, std::memory_order_relaxed);
      phase.store(p + 1, std::memory_order_release);
    } else {
      while (phase.load(std::memory_order_acquire) == p) std::this_thread::yield();
    }
  };
  std::vector<std::vector<double>> took(n, std::vector<double>(rounds));
  auto device = [&](int i) {
    for (int it = 0; it < rounds; ++it) {
      std::memset(src[i]->data(), (it + i) & 0x7f, bytes);
      barrier();
      const auto t0 = std::chrono::steady_clock::now();
      std::memcpy(dst[i]->data(), src[(i + 1) % n]->data(), bytes);
      asm volatile("" : : "r"(dst[i]->data()) : "memory");
      took[i][it] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      barrier();  // no block is written again while another thread still reads it
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < n; ++i) threads.emplace_back(device, i);
  device(0);
  for (auto& t : threads) t.join();
  std::vector<double> slowest;
  for (int it = 2; it < rounds; ++it) {
    double m = 0;
    for (int i = 0; i < n; ++i) m = std::max(m, took[i][it]);
    slowest.push_back(m);
  }
  return summary(slowest, fastest);
}

std::vector<std::size_t> sizes(const BenchOptions& o) {
  const std::size_t lo = parse_bytes(o.min, "--min"), hi = parse_bytes(o.max, "--max");
  if (o.factor < 2) throw Error(ErrorKind::parse, "--factor is " + std::to_string(o.factor) + "; use 2 or more");
  if (lo == 0 || lo > hi)
    throw Error(ErrorKind::parse, "--min (" + o.min + ") must be at least 1 byte and at most --max (" + o.max + ")");
  std::vector<std::size_t> out;
  for (std::size_t s = lo; s <= hi; s *= o.factor) out.push_back(s);
  return out;
}

int cores() { return std::max(1u, std::thread::hardware_concurrency()); }

// Devices that share this host's cores: the local ranks under mpiexec, the threads under sim.
int local_devices(const Runtime& rt, const Mesh& mesh) {
  if (rt.backend() == Backend::sim) return mesh.devices();
  const int sharing = processes_on_these_cores();  // emulated hosts: SHARDLAB_CROWDED=1 counts them all
  return sharing > 0 ? sharing : mpi::world_size();
}

}  // namespace

std::size_t BenchResult::wrong() const {
  std::size_t w = 0;
  for (const auto& r : rows) w += r.ours_wrong + r.native_wrong;
  return w;
}

std::size_t parse_bytes(const std::string& text, const std::string& what) {
  std::size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &used);
  } catch (...) {
    used = 0;
  }
  const std::string unit = used ? text.substr(used) : "?";
  const std::size_t scale = unit.empty() || unit == "B" ? 1
                            : unit == "K" || unit == "KiB" ? 1024
                            : unit == "M" || unit == "MiB" ? 1024 * 1024
                            : unit == "G" || unit == "GiB" ? std::size_t{1} << 30
                                                           : 0;
  if (!used || !scale || !number_syntax(text.substr(0, used), true).empty())
    throw Error(ErrorKind::parse, what + " is '" + text + "'; give bytes such as 4096, 64K, 16M or 1G");
  if (v > (std::size_t{1} << 50) / scale)
    throw Error(ErrorKind::parse, what + " is '" + text + "', more than 1 PiB; give bytes such as 4096, 64K, 16M or 1G");
  return v * scale;
}

double bus_factor(const std::string& op, int n) {
  if (n <= 1) return 0;
  if (op == "collective_permute") return 1.0;  // every device sends its whole block
  return (op == "all_reduce" ? 2.0 : 1.0) * (n - 1) / n;
}

std::size_t bytes_sent_per_device(const std::string& op, int n, std::size_t count, std::size_t element_bytes) {
  if (n <= 1) return 0;
  return (op == "all_reduce" ? 2 : 1) * std::size_t(n - 1) * (count / n) * element_bytes;
}

namespace {
// What every device of the collectives benchmark needs to know.
struct Setup {
  std::vector<std::string> axes, ops;
  std::vector<std::size_t> bytes;
  int iters = 0, warmup = 0;
  bool native = false, perturb = false, fastest = false;  // fastest: the min of the calls, not the median
  std::size_t memcpy_max = 0;
  DType dtype = DType::float32;
  Pattern pattern;
  std::function<std::size_t(std::size_t)> count_of;  // elements timed for a size in bytes
};

// One device's part: for each size and op, warm-up calls, then timed calls of ours (and MPICH's,
// alternating which goes first) beside a memcpy of the same bytes; seconds and wrong counts out.
template <class T>
Outputs time_collectives(Device& dev, const Setup& u) {
  const Group g = dev.group(u.axes);
  const int n = g.size();
  std::unique_ptr<mpi::MpichCollectives> theirs;
  if (u.native) theirs = mpi::mpich_collectives(g);
  // memcpy's two buffers, mapped and touched once: no page faults in its timed copies.
  Pages from(u.memcpy_max, 1), to(u.memcpy_max, 0);
  const std::size_t S = u.bytes.size(), O = u.ops.size();
  // seconds(s, k, i) and wrong(s, k, i): i = 0 ours, 1 native, 2 memcpy (seconds only)
  Tensor seconds = xt::zeros<double>({S, O, std::size_t{3}}), wrong = xt::zeros<double>({S, O, std::size_t{2}});
  Tensor first = xt::zeros<double>({S, O});  // iterations in which ours ran before native
  std::vector<double> syncs;
  syncs.reserve(S * O * u.iters * 2);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (std::size_t s = 0; s < S; ++s) {
    const std::size_t count = u.count_of(u.bytes[s]);
    for (std::size_t k = 0; k < O; ++k) {
      const std::string& op = u.ops[k];
      const xt::xarray<T> in[2] = {bench_input<T>(op, g.me, n, count, 0, u.pattern),
                                    theirs ? bench_input<T>(op, g.me, n, count, 1, u.pattern) : xt::xarray<T>()};
      const std::size_t out_len = op == "reduce_scatter" ? count / n : count;
      std::vector<T> out(theirs ? out_len : 0, element_cast<T>(nan));  // MPICH's output, touched before timing
      int calls = 0;  // MPICH's calls so far: its input variant is calls % 2
      const double perturb = u.perturb ? 1.0 : 0.0;
      const std::size_t copy = bytes_sent_per_device(op, n, count, sizeof(T));
      auto run_ours = [&](bool check) {
        const auto t0 = std::chrono::steady_clock::now();
        const xt::xarray<T> got = call(op, dev, in[0], u.axes);
        const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (check) wrong(s, k, 0) += double(count_wrong(op, g.me, n, count, got.data(), got.size(), perturb, u.pattern));
        return sec;
      };
      auto run_native = [&](bool check) {
        const auto t0 = std::chrono::steady_clock::now();
        const int v = calls++ % 2;
        theirs->call(op, u.dtype, in[v].data(), count, out.data());
        const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (check)
          wrong(s, k, 1) += double(
              count_wrong(op, g.me, n, count, out.data(), out.size(), shift_of(op, n, v) + perturb, u.pattern));
        return sec;
      };
      auto run_memcpy = [&] {
        const auto t0 = std::chrono::steady_clock::now();
        std::memcpy(to.data(), from.data(), copy);
        asm volatile("" : : "r"(to.data()) : "memory");  // the copy is done and may be read: not optimised away
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      };
      for (int w = 0; w < u.warmup; ++w) {
        meet(dev, g);
        run_ours(false);
        if (theirs) {
          meet(dev, g);
          run_native(false);
        }
        run_memcpy();
      }
      std::vector<double> took[3] = {std::vector<double>(u.iters), std::vector<double>(u.iters),
                                     std::vector<double>(u.iters)};
      for (int it = 0; it < u.iters; ++it) {
        // Which implementation goes first alternates: ours, native; native, ours; ... The order is
        // counted from what ran, not from the parity.
        int step = 0, ours_at = -1, native_at = -1;
        for (int impl : {it % 2, 1 - it % 2}) {
          if (impl == 1 && !theirs) continue;
          syncs.push_back(meet(dev, g));
          (impl ? native_at : ours_at) = step++;
          took[impl][it] = impl ? run_native(true) : run_ours(true);
        }
        if (theirs && ours_at < native_at) first(s, k) += 1;
        took[2][it] = run_memcpy();
      }
      seconds(s, k, 0) = summary(took[0], u.fastest);
      seconds(s, k, 1) = theirs ? summary(took[1], u.fastest) : -1;
      seconds(s, k, 2) = copy ? summary(took[2], u.fastest) : -1;
    }
  }
  if (trace_spans() == nullptr) dev.ledger().clear();  // thousands of rows nobody reads (unless traced)
  Tensor sync = xt::zeros<double>({std::size_t{1}});
  sync(0) = median(syncs);
  return {{"seconds", seconds}, {"wrong", wrong}, {"first", first}, {"sync", sync}};
}
}  // namespace

BenchResult run_collectives_bench(const BenchOptions& o) {
  const Backend backend = parse_backend(o.backend);
  const DType dtype = parse_dtype(o.dtype);
  const std::size_t eb = element_bytes(dtype);
  // Without --mesh the group is one device per process: outside mpiexec, a "group" of one. (With
  // --mesh, check_mesh says how many processes it needs.)
  if (backend == Backend::mpi && o.mesh.empty() && launched_processes() == 0)
    throw Error(ErrorKind::world_size, "--backend mpi times processes started by mpiexec; run it as mpiexec -n 2 "
                                       "build/bin/shardlab ... --backend mpi");
  Runtime rt(backend, false, dtype);
  rt.set_replay(false);  // every element is checked against its formula already
  const Mesh mesh = Mesh::parse(o.mesh.empty() ? "X=" + std::to_string(backend == Backend::mpi ? mpi::world_size() : 2)
                                               : o.mesh);
  rt.check_mesh(mesh);
  if (!o.trace.empty()) {
    check_writable(o.trace, "trace");
    rt.record_trace();
  }
  const std::vector<std::string> axes = o.axes.empty() ? mesh.names() : parse_axes(mesh, o.axes);
  std::vector<std::string> ops;
  for (const auto& op : split(o.ops, ','))
    if (std::find(kOps.begin(), kOps.end(), op) != kOps.end()) ops.push_back(op);
    else throw Error(ErrorKind::parse, "--ops names '" + op + "'; use " + join(kOps, ","));
  const std::vector<std::size_t> bytes = sizes(o);
  if (o.statistic != "median" && o.statistic != "min")
    throw Error(ErrorKind::parse, "--statistic is '" + o.statistic + "'; use median or min");
  const bool fastest = o.statistic == "min";
  const int n = mesh.axes_size(axes), here = local_devices(rt, mesh);
  if (backend == Backend::sim && mesh.devices() > 64)
    throw Error(ErrorKind::unsupported, "bench collectives on the sim backend times at most 64 devices (each a thread "
                                        "on " + std::to_string(cores()) + " cores); mesh " + mesh.text() + " has " +
                                            std::to_string(mesh.devices()));
  const bool crowded = here > cores();
  // Each device here holds its input, its output, the expected values and a ring buffer: about 4x.
  refuse_if_over_memory(4.0 * static_cast<double>(bytes.back()) * here, "bench collectives up to --max " + o.max,
                        "give a smaller --max");
  const int iters = o.iters >= 1 ? o.iters : crowded ? 2 : 20, warmup = o.warmup >= 0 ? o.warmup : crowded ? 1 : 5;
  const bool native = backend == Backend::mpi;
  if (dtype == DType::bfloat16 && n > 15)
    throw Error(ErrorKind::unsupported, "bench collectives in bfloat16 takes groups of at most 15 devices (its "
                                        "values must stay exact integers up to 256); this group has " +
                                            std::to_string(n) + ": use --dtype float32");
  auto count_of = [n, eb](std::size_t b) { return std::max<std::size_t>(n, b / eb / n * n); };

  BenchResult result;
  result.group_size = n;
  result.native = native;
  result.iters = iters;
  result.statistic = o.statistic;
  auto& h = result.header;
  h.push_back("shardlab bench collectives: backend " + o.backend + ", mesh " + mesh.text() + ", group over " +
              axes_text(axes) + " (" + std::to_string(n) + " devices)");
  h.push_back(std::to_string(here) + (backend == Backend::mpi ? " ranks (processes)" : " devices (threads)") +
              " on this host's " + std::to_string(cores()) + " cores; " + std::to_string(iters) +
              " timed calls per size after " + std::to_string(warmup) + " warm-up" +
              (native ? ", ours and native alternating which runs first" : ""));
  h.push_back("element type: " + dtype_text(dtype) + "; size(B) = count x " + std::to_string(eb) + " B");
  h.push_back("BLAS (kernel set): " + blas_description() + "; reductions: a plain C++ loop");
  h.push_back(std::string("ours: ring all_reduce/all_gather/reduce_scatter, pairwise all_to_all over ") +
              (native ? "MPI_Isend/MPI_Irecv" : "in-process mailboxes") +
              (native ? "; native: " + mpi::library_version() +
                            " MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Alltoall called directly"
                            " on the group's communicator, preallocated buffers (shardlab's --collectives native adds"
                            " a signature exchange, an MPI_Ibarrier and staging copies per call: not timed here)"
                      : "; native: none on the sim backend"));
  h.push_back(std::string(fastest ? "time: us of each device's fastest call (--statistic min: where ranks outnumber cores, "
                                     "contention only adds time), slowest device"
                                   : "time: median us per call (robust on a shared machine; nccl-tests prints the mean), slowest device") +
              "; algbw = size/time, busbw = algbw*" +
              std::string("2(n-1)/n (all_reduce) or (n-1)/n, in GB/s (1e9 B/s); #wrong: elements != formula, "
                          "summed over every timed call of every device"));
  const std::string stat = fastest ? "fastest" : "median";  // of the timed calls (--statistic)
  h.push_back("memcpy_us: " + stat + " us of one std::memcpy of the bytes a device sends in that collective (2(n-1)/n x size "
              "for all_reduce, (n-1)/n x size for the others) between two preallocated, pre-touched buffers, on every "
              "device beside each timed call, slowest device; ours/memcpy = ours_us / memcpy_us" +
              std::string(native ? " (under MPI in the CSV only)" : ""));
  if (!native)
    h.push_back("peer_us: " + stat + " us of the same std::memcpy from bytes another thread has just written, as a "
                "device's data is when another device's thread takes it (the lines cross between the cores' "
                "caches), the group's threads copying at once as in a collective, slowest thread; "
                "ours/peer = ours_us / peer_us");
  if (crowded)
    h.push_back("warning: " + std::to_string(here) + (backend == Backend::mpi ? " ranks" : " devices") + " share " +
                std::to_string(cores()) +
                " cores: these timings are not meaningful (byte counts would be); time with at most one per core" +
                (fastest ? ", or read them as here, by the fastest call: contention only adds time" : ""));

  std::size_t memcpy_max = 0;
  for (const auto b : bytes)
    for (const auto& op : ops) memcpy_max = std::max(memcpy_max, bytes_sent_per_device(op, n, count_of(b), eb));

  Setup u;
  u.axes = axes;
  u.ops = ops;
  u.bytes = bytes;
  u.iters = iters;
  u.warmup = warmup;
  u.native = native;
  u.perturb = o.perturb_expected;
  u.fastest = fastest;
  u.memcpy_max = memcpy_max;
  u.dtype = dtype;
  u.pattern = pattern_of(dtype);
  u.count_of = count_of;
  const Program program = [&](Device& dev) -> Outputs {
    switch (dtype) {
      case DType::float32: return time_collectives<float>(dev, u);
      case DType::bfloat16: return time_collectives<bfloat16>(dev, u);
      case DType::float64: break;
    }
    return time_collectives<double>(dev, u);
  };
  const RunResult run = rt.run(mesh, program);
  if (!rt.is_root()) return result;
  result.trace = rt.trace();
  for (const auto& out : run.outputs) result.sync_seconds = std::max(result.sync_seconds, out.at("sync")(0));
  for (std::size_t k = 0; k < ops.size(); ++k) {
    for (std::size_t s = 0; s < bytes.size(); ++s) {
      BenchRow row;
      row.op = ops[k];
      row.count = count_of(bytes[s]);
      row.bytes = row.count * eb;
      row.memcpy_bytes = bytes_sent_per_device(row.op, n, row.count, eb);
      for (const auto& out : run.outputs) {
        const Tensor& sec = out.at("seconds");
        const Tensor& wr = out.at("wrong");
        row.ours_seconds = std::max(row.ours_seconds, sec(s, k, 0));
        row.ours_wrong += static_cast<std::size_t>(wr(s, k, 0));
        row.memcpy_seconds = std::max(row.memcpy_seconds, sec(s, k, 2));
        if (native) {
          row.native_seconds = std::max(row.native_seconds, sec(s, k, 1));
          row.native_wrong += static_cast<std::size_t>(wr(s, k, 1));
        }
      }
      // Every device runs the same order; device 0's count stands for all.
      if (native) row.ours_first = static_cast<int>(run.outputs.front().at("first")(s, k));
      if (!native && n > 1 && row.memcpy_bytes > 0) row.peer_memcpy_seconds = peer_memcpy_seconds(row.memcpy_bytes, iters, n, fastest);
      result.rows.push_back(row);
    }
  }
  h.push_back("sync: each timed call starts after an untimed meeting of the group (n-1 ring steps of an 8-byte "
              "control message): median " + fixed(result.sync_seconds * 1e6, 1) + " us, slowest device, in no time above");
  if (native && !result.rows.empty()) {
    int lo = iters, hi = 0;
    for (const auto& r : result.rows) {
      lo = std::min(lo, r.ours_first);
      hi = std::max(hi, r.ours_first);
    }
    h.push_back("order: ours ran first in " + (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)) +
                " of " + std::to_string(iters) + " timed iterations per size, native first in the others (ours_first)");
  }
  return result;
}

namespace {
// One row's cells, in the CSV's order: collective, size, count, then time, algbw, busbw, #wrong
// for ours and for native, ours/native, then memcpy's bytes and time, ours/memcpy, and how often
// ours ran first. Missing values are "-".
std::vector<std::string> cells(const BenchRow& r, int n, bool native) {
  auto timing = [&](double sec, std::size_t wrong, std::vector<std::string>& out) {
    if (sec < 0) {
      out.insert(out.end(), {"-", "-", "-", "-"});
      return;
    }
    const double algbw = sec > 0 ? r.bytes / sec / 1e9 : 0;
    out.insert(out.end(), {fixed(sec * 1e6, 1), fixed(algbw, 3), fixed(algbw * bus_factor(r.op, n), 3),
                           std::to_string(wrong)});
  };
  std::vector<std::string> c = {r.op, std::to_string(r.bytes), std::to_string(r.count)};
  timing(r.ours_seconds, r.ours_wrong, c);
  timing(native ? r.native_seconds : -1, r.native_wrong, c);
  c.push_back(native && r.native_seconds > 0 ? fixed(r.ours_seconds / r.native_seconds, 2) : "-");
  const bool copied = r.memcpy_seconds > 0;
  c.push_back(r.memcpy_bytes ? std::to_string(r.memcpy_bytes) : "-");
  c.push_back(r.memcpy_seconds >= 0 ? fixed(r.memcpy_seconds * 1e6, 2) : "-");
  c.push_back(copied ? fixed(r.ours_seconds / r.memcpy_seconds, 2) : "-");
  c.push_back(native && r.ours_first >= 0 ? std::to_string(r.ours_first) : "-");
  const bool peer = r.peer_memcpy_seconds > 0;
  c.push_back(peer ? fixed(r.peer_memcpy_seconds * 1e6, 2) : "-");
  c.push_back(peer ? fixed(r.ours_seconds / r.peer_memcpy_seconds, 2) : "-");
  return c;
}
const std::vector<std::string> kCsvColumns = {
    "collective",   "size_bytes",   "count",        "ours_us",          "ours_algbw",   "ours_busbw",
    "ours_wrong",   "native_us",    "native_algbw", "native_busbw",     "native_wrong", "ours_over_native",
    "memcpy_bytes", "memcpy_us",    "ours_over_memcpy", "ours_first",   "peer_memcpy_us", "ours_over_peer_memcpy"};
// The printed table keeps within 100 columns (at the default sizes, with every element wrong): on
// the sim backend ours beside memcpy, under MPI ours beside native without count and algbw. The CSV
// has every column. Indices into cells().
struct Column {
  const char* title;
  std::size_t cell;
};
const std::vector<Column> kSimTable = {{"collective", 0},  {"size(B)", 1},      {"ours_us", 3},   {"busbw", 5},
                                       {"#wrong", 6},      {"memcpy_us", 13},   {"ours/memcpy", 14},
                                       {"peer_us", 16},    {"ours/peer", 17}};
const std::vector<Column> kMpiTable = {{"collective", 0}, {"size(B)", 1},   {"ours_us", 3},
                                       {"busbw", 5},      {"#wrong", 6},    {"native_us", 7},
                                       {"busbw", 9},      {"#wrong", 10},   {"ours/native", 11}};

// "# " + line, cut at spaces into lines of at most 100 characters (continuations indented).
std::string comment_lines(const std::string& line) {
  constexpr std::size_t kWidth = 100;
  std::string out, prefix = "# ", rest = line;
  while (prefix.size() + rest.size() > kWidth) {
    std::size_t cut = rest.rfind(' ', kWidth - prefix.size());
    if (cut == std::string::npos || cut == 0) cut = rest.find(' ');
    if (cut == std::string::npos) break;
    out += prefix + rest.substr(0, cut) + "\n";
    rest = rest.substr(cut + 1);
    prefix = "#     ";
  }
  return out + prefix + rest + "\n";
}
}  // namespace

std::string bench_table(const BenchResult& result) {
  std::string out;
  for (const auto& line : result.header) out += comment_lines(line);
  const auto& columns = result.native ? kMpiTable : kSimTable;
  std::vector<std::string> titles;
  for (const auto& c : columns) titles.push_back(c.title);
  Table t(titles);
  std::string last;
  for (const auto& r : result.rows) {
    if (!last.empty() && r.op != last) t.add({});
    last = r.op;
    const auto all = cells(r, result.group_size, result.native);
    std::vector<std::string> row;
    for (const auto& c : columns) row.push_back(all[c.cell]);
    t.add(row);
  }
  out += t.text("");
  out += "# total #wrong: " + std::to_string(result.wrong()) + "\n";
  return out;
}

std::string bench_csv(const BenchResult& result) {
  std::string out;
  for (const auto& line : result.header) out += "# " + line + "\n";
  out += "# missing values are '-'; columns:\n# " + join(kCsvColumns, ",") + "\n";
  for (const auto& r : result.rows) out += join(cells(r, result.group_size, result.native), ",") + "\n";
  return out;
}

int bench_collectives(const BenchOptions& options) {
  if (!options.csv.empty()) check_writable(options.csv, "--csv");  // every rank: all refuse alike
  refuse_shared_paths({{"--csv", options.csv}, {"--trace", options.trace}}, {{"--machine", options.machine}});
  // A bad machine file: exit 2 on every rank before anything runs.
  const Hardware model = hardware_preset("this-machine", presets_with_machine(options.machine));
  const BenchResult result = run_collectives_bench(options);
  const bool root = process_is_root();
  int status = 0;
  if (root) {
    std::cout << bench_table(result);
    if (!options.machine.empty()) std::cout << model_table(result, model, options.machine);
    std::cout << std::flush;
    if (!options.csv.empty()) {
      try {  // whole or not at all: a full disk leaves the old file (or none), never a partial one
        write_file_whole(options.csv, "--csv", [&](std::ostream& f) { f << bench_csv(result); });
      } catch (const Error& e) {
        std::cerr << "error: " << e.what() << "\n";
        status = 3;
      }
    }
    if (status == 0 && result.wrong() > 0) status = 1;
    if (!options.trace.empty())
      status = std::max(status, keep_trace_file(options.trace, {TraceSource{"bench collectives", result.trace}}));
  }
  return options.backend == "mpi" ? mpi::agree(status) : status;
}

}  // namespace shardlab
