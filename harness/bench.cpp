#include "harness/bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <thread>

#include "collectives/collectives.hpp"
#include "collectives/mpi.hpp"
#include "collectives/runtime.hpp"
#include "core/blas.hpp"
#include "core/error.hpp"
#include "core/mesh.hpp"
#include "core/text.hpp"
#include "harness/table.hpp"

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
//   all_reduce      in[i] = p + i%13             out[i] = n(n-1)/2 + n*(i%13)
//   all_gather      in[j] = p + j%13 (c = count/n of them)
//                   out[q*c + j] = q + j%13
//   reduce_scatter  in[i] = p + i%13 (count)      out[j] = n(n-1)/2 + n*((p*c + j)%13)
//   all_to_all      in[i] = 100p + i%97           out[q*c + j] = 100q + (p*c + j)%97
Tensor bench_input(const std::string& op, int p, int n, std::size_t count) {
  const std::size_t len = op == "all_gather" ? count / n : count;
  Tensor t = xt::zeros<double>({len});
  double* d = t.data();
  for (std::size_t i = 0; i < len; ++i) d[i] = op == "all_to_all" ? 100.0 * p + i % 97 : p + double(i % 13);
  return t;
}

std::size_t count_wrong(const std::string& op, int p, int n, std::size_t count, const Tensor& out, double perturb) {
  const std::size_t c = count / n, len = op == "reduce_scatter" ? c : count;
  if (out.size() != len) return len;
  const double tri = n * (n - 1) / 2.0;
  const double* d = out.data();
  std::size_t wrong = 0;
  for (std::size_t k = 0; k < len; ++k) {
    double want;
    if (op == "all_reduce") want = tri + n * double(k % 13);
    else if (op == "all_gather") want = double(k / c) + double(k % c % 13);
    else if (op == "reduce_scatter") want = tri + n * double((p * c + k) % 13);
    else want = 100.0 * double(k / c) + double((p * c + k % c) % 97);
    wrong += d[k] != want + perturb;
  }
  return wrong;
}

Tensor call(const std::string& op, Device& dev, const Tensor& in, const std::vector<std::string>& axes) {
  if (op == "all_reduce") return all_reduce(dev, in, axes, "bench");
  if (op == "all_gather") return all_gather(dev, in, axes, 0, "bench");
  if (op == "reduce_scatter") return reduce_scatter(dev, in, axes, 0, "bench");
  return all_to_all(dev, in, axes, 0, 0, "bench");
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
  if (const char* v = std::getenv("MPI_LOCALNRANKS")) return std::max(1, std::atoi(v));
  return mpi::world_size();
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
  if (!used || !scale || text[0] == '-')
    throw Error(ErrorKind::parse, what + " is '" + text + "'; give bytes such as 4096, 64K, 16M or 1G");
  return v * scale;
}

double bus_factor(const std::string& op, int n) {
  if (n <= 1) return 0;
  return (op == "all_reduce" ? 2.0 : 1.0) * (n - 1) / n;
}

BenchResult run_collectives_bench(const BenchOptions& o) {
  const Backend backend = parse_backend(o.backend);
  Runtime rt(backend);
  const Mesh mesh = Mesh::parse(o.mesh.empty() ? "X=" + std::to_string(backend == Backend::mpi ? mpi::world_size() : 2)
                                               : o.mesh);
  rt.check_mesh(mesh);
  const std::vector<std::string> axes = o.axes.empty() ? mesh.names() : parse_axes(mesh, o.axes);
  std::vector<std::string> ops;
  for (const auto& op : split(o.ops, ','))
    if (std::find(kOps.begin(), kOps.end(), op) != kOps.end()) ops.push_back(op);
    else throw Error(ErrorKind::parse, "--ops names '" + op + "'; use " + join(kOps, ","));
  const std::vector<std::size_t> bytes = sizes(o);
  const int n = mesh.axes_size(axes), here = local_devices(rt, mesh);
  const bool crowded = here > cores();
  const int iters = o.iters >= 1 ? o.iters : crowded ? 2 : 20, warmup = o.warmup >= 0 ? o.warmup : crowded ? 1 : 5;
  const bool native = backend == Backend::mpi;

  BenchResult result;
  result.group_size = n;
  result.native = native;
  auto& h = result.header;
  h.push_back("shardlab bench collectives: backend " + o.backend + ", mesh " + mesh.text() + ", group over " +
              axes_text(axes) + " (" + std::to_string(n) + " devices)");
  h.push_back(std::to_string(here) + (backend == Backend::mpi ? " ranks (processes)" : " devices (threads)") +
              " on this host's " + std::to_string(cores()) + " cores; " + std::to_string(iters) +
              " timed calls per size after " + std::to_string(warmup) + " warm-up" +
              (native ? ", ours and native interleaved call by call" : ""));
  h.push_back("BLAS (kernel set): " + blas_description() + "; reductions: a plain C++ loop");
  h.push_back(std::string("ours: ring all_reduce/all_gather/reduce_scatter, pairwise all_to_all over ") +
              (native ? "MPI_Isend/MPI_Irecv" : "in-process mailboxes") +
              (native ? "; native: " + mpi::library_version() +
                            " MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Alltoall"
                      : "; native: none on the sim backend"));
  h.push_back("time: median us per call (robust on a shared machine; nccl-tests prints the mean), slowest device; algbw = size/time, busbw = algbw*" +
              std::string("2(n-1)/n (all_reduce) or (n-1)/n, in GB/s (1e9 B/s); #wrong: elements != formula"));
  if (crowded)
    h.push_back("warning: " + std::to_string(here) + (backend == Backend::mpi ? " ranks" : " devices") + " share " +
                std::to_string(cores()) +
                " cores: these timings are not meaningful (byte counts would be); time with at most one per core");

  const Program program = [&](Device& dev) -> Outputs {
    const Group g = dev.group(axes);
    std::unique_ptr<Device> theirs;
    if (native) theirs = std::make_unique<Device>(dev.id(), dev.mesh(), dev.transport(), true);
    const std::size_t S = bytes.size(), O = ops.size();
    Tensor seconds = xt::zeros<double>({S, O, std::size_t{2}}), wrong = xt::zeros<double>({S, O, std::size_t{2}});
    for (std::size_t s = 0; s < S; ++s) {
      const std::size_t count = std::max<std::size_t>(n, bytes[s] / sizeof(double) / n * n);
      for (std::size_t k = 0; k < O; ++k) {
        const std::string& op = ops[k];
        const Tensor in = bench_input(op, g.me, n, count);
        for (int w = 0; w < warmup; ++w) {
          call(op, dev, in, axes);
          if (theirs) call(op, *theirs, in, axes);
        }
        std::vector<double> took[2] = {std::vector<double>(iters, 0.0), std::vector<double>(iters, 0.0)};
        for (int it = 0; it < iters; ++it) {
          for (int impl = 0; impl < (theirs ? 2 : 1); ++impl) {
            const auto t0 = std::chrono::steady_clock::now();
            const Tensor out = call(op, impl ? *theirs : dev, in, axes);
            took[impl][it] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (it == iters - 1) wrong(s, k, impl) = double(count_wrong(op, g.me, n, count, out, o.perturb_expected));
          }
        }
        for (int impl = 0; impl < 2; ++impl) {
          std::nth_element(took[impl].begin(), took[impl].begin() + iters / 2, took[impl].end());
          seconds(s, k, impl) = took[impl][iters / 2];
        }
      }
    }
    dev.ledger().clear();  // thousands of rows nobody reads
    return {{"seconds", seconds}, {"wrong", wrong}};
  };
  const RunResult run = rt.run(mesh, program);
  if (!rt.is_root()) return result;
  for (std::size_t k = 0; k < ops.size(); ++k) {
    for (std::size_t s = 0; s < bytes.size(); ++s) {
      BenchRow row;
      row.op = ops[k];
      row.count = std::max<std::size_t>(n, bytes[s] / sizeof(double) / n * n);
      row.bytes = row.count * sizeof(double);
      for (const auto& out : run.outputs) {
        const Tensor& sec = out.at("seconds");
        const Tensor& wr = out.at("wrong");
        row.ours_seconds = std::max(row.ours_seconds, sec(s, k, 0));
        row.ours_wrong += static_cast<std::size_t>(wr(s, k, 0));
        if (native) {
          row.native_seconds = std::max(row.native_seconds, sec(s, k, 1));
          row.native_wrong += static_cast<std::size_t>(wr(s, k, 1));
        }
      }
      result.rows.push_back(row);
    }
  }
  return result;
}

namespace {
// One row's cells: collective, size, count, then time, algbw, busbw, #wrong for ours and native,
// then ours/native. Missing values are "-".
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
  return c;
}
const std::vector<std::string> kColumns = {"collective", "size(B)",   "count",   "ours_us",     "algbw",
                                           "busbw",      "#wrong",    "native_us", "algbw",     "busbw",
                                           "#wrong",     "ours/native"};
}  // namespace

std::string bench_table(const BenchResult& result) {
  std::string out;
  for (const auto& line : result.header) out += "# " + line + "\n";
  // Without a native side (sim) its columns are left out here; the CSV keeps them as "-".
  const std::size_t columns = result.native ? kColumns.size() : 7;
  Table t(std::vector<std::string>(kColumns.begin(), kColumns.begin() + columns));
  std::string last;
  for (const auto& r : result.rows) {
    if (!last.empty() && r.op != last) t.add({});
    last = r.op;
    auto c = cells(r, result.group_size, result.native);
    c.resize(columns);
    t.add(c);
  }
  out += t.text("");
  out += "# total #wrong: " + std::to_string(result.wrong()) + "\n";
  return out;
}

std::string bench_csv(const BenchResult& result) {
  std::string out;
  for (const auto& line : result.header) out += "# " + line + "\n";
  out += "# missing values are '-'; columns:\n# ";
  const std::vector<std::string> names = {"collective", "size_bytes",  "count",       "ours_us",
                                          "ours_algbw",  "ours_busbw", "ours_wrong",  "native_us",
                                          "native_algbw", "native_busbw", "native_wrong", "ours_over_native"};
  out += join(names, ",") + "\n";
  for (const auto& r : result.rows) out += join(cells(r, result.group_size, result.native), ",") + "\n";
  return out;
}

int bench_collectives(const BenchOptions& options) {
  const BenchResult result = run_collectives_bench(options);
  const bool root = process_is_root();
  int status = 0;
  if (root) {
    std::cout << bench_table(result) << std::flush;
    if (!options.csv.empty()) {
      std::ofstream f(options.csv);
      f << bench_csv(result);
      if (!f) {
        std::cerr << "error: cannot write " << options.csv << "\n";
        status = 2;
      }
    }
    if (status == 0 && result.wrong() > 0) status = 1;
  }
  return options.backend == "mpi" ? mpi::agree(status) : status;
}

}  // namespace shardlab
