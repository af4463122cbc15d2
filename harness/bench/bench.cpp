// shardlab bench collectives: the timing loop every device runs, the options it reads, and the
// command. The collectives it times fill one interface (bench_collective.hpp, one file each); the
// header lines, table and CSV are in bench_table.cpp.
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

#include "collectives/mpi.hpp"
#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/trace.hpp"
#include "core/mesh.hpp"
#include "core/text.hpp"
#include "harness/check/trace.hpp"
#include "harness/bench/bench_collective.hpp"
#include "harness/bench/bench_table.hpp"
#include "harness/bench/calibrate.hpp"
#include "harness/cost/machine.hpp"
#include "core/write_file.hpp"

namespace shardlab {

namespace {

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

namespace {
// What every device of the collectives benchmark needs to know.
struct Setup {
  std::vector<std::string> axes;
  std::vector<const BenchCollective*> ops;
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
      const BenchCollective& op = *u.ops[k];
      const xt::xarray<T> in[2] = {bench_input<T>(op, g.me, n, count, 0, u.pattern),
                                    theirs ? bench_input<T>(op, g.me, n, count, 1, u.pattern) : xt::xarray<T>()};
      const std::size_t out_len = op.expected(g.me, n, count, u.pattern).size();
      std::vector<T> out(theirs ? out_len : 0, element_cast<T>(nan));  // MPICH's output, touched before timing
      int calls = 0;  // MPICH's calls so far: its input variant is calls % 2
      const double perturb = u.perturb ? 1.0 : 0.0;
      const std::size_t copy = bytes_sent_per_device(op.name, n, count, sizeof(T));
      auto run_ours = [&](bool check) {
        const auto t0 = std::chrono::steady_clock::now();
        const xt::xarray<T> got = op.ours_of<T>()(dev, in[0], u.axes);
        const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (check) wrong(s, k, 0) += double(count_wrong(op, g.me, n, count, got.data(), got.size(), perturb, u.pattern));
        return sec;
      };
      auto run_native = [&](bool check) {
        const auto t0 = std::chrono::steady_clock::now();
        const int v = calls++ % 2;
        theirs->call(op.name, u.dtype, in[v].data(), count, out.data());
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

namespace {
// Every row of the table from every device's seconds and wrong counts (root only).
void add_rows(BenchResult& result, const RunResult& run, const Setup& u, std::size_t eb) {
  const int n = result.group_size;
  for (const auto& out : run.outputs) result.sync_seconds = std::max(result.sync_seconds, out.at("sync")(0));
  for (std::size_t k = 0; k < u.ops.size(); ++k) {
    for (std::size_t s = 0; s < u.bytes.size(); ++s) {
      BenchRow row;
      row.op = u.ops[k]->name;
      row.count = u.count_of(u.bytes[s]);
      row.bytes = row.count * eb;
      row.memcpy_bytes = bytes_sent_per_device(row.op, n, row.count, eb);
      for (const auto& out : run.outputs) {
        const Tensor& sec = out.at("seconds");
        const Tensor& wr = out.at("wrong");
        row.ours_seconds = std::max(row.ours_seconds, sec(s, k, 0));
        row.ours_wrong += static_cast<std::size_t>(wr(s, k, 0));
        row.memcpy_seconds = std::max(row.memcpy_seconds, sec(s, k, 2));
        if (u.native) {
          row.native_seconds = std::max(row.native_seconds, sec(s, k, 1));
          row.native_wrong += static_cast<std::size_t>(wr(s, k, 1));
        }
      }
      // Every device runs the same order; device 0's count stands for all.
      if (u.native) row.ours_first = static_cast<int>(run.outputs.front().at("first")(s, k));
      if (!u.native && n > 1 && row.memcpy_bytes > 0)
        row.peer_memcpy_seconds = peer_memcpy_seconds(row.memcpy_bytes, u.iters, n, u.fastest);
      result.rows.push_back(row);
    }
  }
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
  Setup u;
  u.axes = o.axes.empty() ? mesh.names() : parse_axes(mesh, o.axes);
  u.ops = bench_ops(o.ops);
  u.bytes = bench_sizes(o);
  if (o.statistic != "median" && o.statistic != "min")
    throw Error(ErrorKind::parse, "--statistic is '" + o.statistic + "'; use median or min");
  u.fastest = o.statistic == "min";
  const int n = mesh.axes_size(u.axes), here = local_devices(rt, mesh);
  if (backend == Backend::sim && mesh.devices() > 64)
    throw Error(ErrorKind::unsupported, "bench collectives on the sim backend times at most 64 devices (each a thread "
                                        "on " + std::to_string(cores()) + " cores); mesh " + mesh.text() + " has " +
                                            std::to_string(mesh.devices()));
  const bool crowded = here > cores();
  // Each device here holds its input, its output, the expected values and a ring buffer: about 4x.
  refuse_if_over_memory(4.0 * static_cast<double>(u.bytes.back()) * here, "bench collectives up to --max " + o.max,
                        "give a smaller --max");
  u.iters = o.iters >= 1 ? o.iters : crowded ? 2 : 20;
  u.warmup = o.warmup >= 0 ? o.warmup : crowded ? 1 : 5;
  u.native = backend == Backend::mpi;
  if (dtype == DType::bfloat16 && n > 15)
    throw Error(ErrorKind::unsupported, "bench collectives in bfloat16 takes groups of at most 15 devices (its "
                                        "values must stay exact integers up to 256); this group has " +
                                            std::to_string(n) + ": use --dtype float32");
  u.count_of = [n, eb](std::size_t b) { return std::max<std::size_t>(n, b / eb / n * n); };
  for (const auto b : u.bytes)
    for (const BenchCollective* op : u.ops)
      u.memcpy_max = std::max(u.memcpy_max, bytes_sent_per_device(op->name, n, u.count_of(b), eb));
  u.perturb = o.perturb_expected;
  u.dtype = dtype;
  u.pattern = pattern_of(dtype);

  BenchResult result;
  result.group_size = n;
  result.native = u.native;
  result.iters = u.iters;
  result.statistic = o.statistic;
  result.header = bench_header({o.backend, mesh.text(), axes_text(u.axes), n, here, cores(), u.iters, u.warmup,
                                u.native, u.fastest, crowded, dtype});
  const SpmdProgram program = [&](Device& dev) -> Outputs {
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
  add_rows(result, run, u, eb);
  add_run_lines(result);
  return result;
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
