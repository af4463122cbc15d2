// The collectives benchmark's text: the "# ..." lines that say how the run was set up and how to
// read each column, the printed table (within 100 columns) and the CSV (every column).
#include "harness/bench/bench_table.hpp"

#include <algorithm>
#include <cstdio>

#include "collectives/mpi.hpp"
#include "core/blas.hpp"
#include "core/table.hpp"
#include "core/text.hpp"

namespace shardlab {

namespace {
std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}
}  // namespace

std::vector<std::string> bench_header(const BenchFacts& f) {
  std::vector<std::string> h;
  h.push_back("shardlab bench collectives: backend " + f.backend + ", mesh " + f.mesh + ", group over " +
              f.axes + " (" + std::to_string(f.group) + " devices)");
  h.push_back(std::to_string(f.here) + (f.native ? " ranks (processes)" : " devices (threads)") +
              " on this host's " + std::to_string(f.cores) + " cores; " + std::to_string(f.iters) +
              " timed calls per size after " + std::to_string(f.warmup) + " warm-up" +
              (f.native ? ", ours and native alternating which runs first" : ""));
  h.push_back("element type: " + dtype_text(f.dtype) + "; size(B) = count x " + std::to_string(element_bytes(f.dtype)) + " B");
  h.push_back("BLAS (kernel set): " + blas_description() + "; reductions: a plain C++ loop");
  h.push_back(std::string("ours: ring all_reduce/all_gather/reduce_scatter, pairwise all_to_all over ") +
              (f.native ? "MPI_Isend/MPI_Irecv" : "in-process mailboxes") +
              (f.native ? "; native: " + mpi::library_version() +
                            " MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Alltoall called directly"
                            " on the group's communicator, preallocated buffers (shardlab's --collectives native adds"
                            " a signature exchange, an MPI_Ibarrier and staging copies per call: not timed here)"
                      : "; native: none on the sim backend"));
  h.push_back(std::string(f.fastest ? "time: us of each device's fastest call (--statistic min: where ranks outnumber cores, "
                                     "contention only adds time), slowest device"
                                   : "time: median us per call (robust on a shared machine; nccl-tests prints the mean), slowest device") +
              "; algbw = size/time, busbw = algbw*" +
              std::string("2(n-1)/n (all_reduce) or (n-1)/n, in GB/s (1e9 B/s); #wrong: elements != formula, "
                          "summed over every timed call of every device"));
  const std::string stat = f.fastest ? "fastest" : "median";  // of the timed calls (--statistic)
  h.push_back("memcpy_us: " + stat + " us of one std::memcpy of the bytes a device sends in that collective (2(n-1)/n x size "
              "for all_reduce, (n-1)/n x size for the others) between two preallocated, pre-touched buffers, on every "
              "device beside each timed call, slowest device; ours/memcpy = ours_us / memcpy_us" +
              std::string(f.native ? " (under MPI in the CSV only)" : ""));
  if (!f.native)
    h.push_back("peer_us: " + stat + " us of the same std::memcpy from bytes another thread has just written, as a "
                "device's data is when another device's thread takes it (the lines cross between the cores' "
                "caches), the group's threads copying at once as in a collective, slowest thread; "
                "ours/peer = ours_us / peer_us");
  if (f.crowded)
    h.push_back("warning: " + std::to_string(f.here) + (f.native ? " ranks" : " devices") + " share " +
                std::to_string(f.cores) +
                " cores: these timings are not meaningful (byte counts would be); time with at most one per core" +
                (f.fastest ? ", or read them as here, by the fastest call: contention only adds time" : ""));

  return h;
}

void add_run_lines(BenchResult& result) {
  auto& h = result.header;
  h.push_back("sync: each timed call starts after an untimed meeting of the group (n-1 ring steps of an 8-byte "
              "control message): median " + fixed(result.sync_seconds * 1e6, 1) + " us, slowest device, in no time above");
  if (result.native && !result.rows.empty()) {
    int lo = result.iters, hi = 0;
    for (const auto& r : result.rows) {
      lo = std::min(lo, r.ours_first);
      hi = std::max(hi, r.ours_first);
    }
    h.push_back("order: ours ran first in " + (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)) +
                " of " + std::to_string(result.iters) + " timed iterations per size, native first in the others (ours_first)");
  }
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


}  // namespace shardlab
