// The mpi backend: one run on one rank, from the world-size check to the results on rank 0.
//   1. check_world: one process per device, or one sentence that says how to start it.
//   2. enter: every rank reaches the run (rank 0 collects a note from each, then says go), so the
//      MPI_Comm_create_group calls that make the group communicators cannot hang.
//   3. the program on this rank's Device, over an MpiTransport; a failure aborts the other ranks'
//      waits (MpiRun).
//   4. collect: every rank sends rank 0 its outcome, outputs and ledger rows (harness traffic, not in
//      the ledger); rank 0 watches for deadlocks meanwhile, then sends every rank the verdict, so a
//      failure anywhere is the same Error everywhere.
// Part of the mpi backend's module (collectives/mpi_module.hpp): collectives/mpi.cpp calls these
// through the module's table.
#include "collectives/mpi_module.hpp"

#include "collectives/stop_point.hpp"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <iterator>

#include "collectives/mpi_transport.hpp"
#include "collectives/mpi_monitor.hpp"
#include "collectives/mpi_watchdog.hpp"
#include "collectives/mpi_world.hpp"
#include "collectives/watchdog.hpp"
#include "core/error.hpp"

namespace shardlab::mpi_module {

namespace {

// ---- byte packing for results and verdicts ----
struct Writer {
  std::vector<char> bytes;
  void raw(const void* p, std::size_t n) { bytes.insert(bytes.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n); }
  void u64(std::uint64_t v) { raw(&v, sizeof v); }
  void text(const std::string& s) { u64(s.size()); raw(s.data(), s.size()); }
};
struct Reader {
  const std::vector<char>& bytes;
  std::size_t at = 0;
  void raw(void* p, std::size_t n) {
    if (at + n > bytes.size()) throw Error(ErrorKind::device, "a result message from another rank is truncated");
    std::memcpy(p, bytes.data() + at, n);
    at += n;
  }
  std::uint64_t u64() { std::uint64_t v; raw(&v, sizeof v); return v; }
  std::string text() { std::string s(u64(), '\0'); raw(s.data(), s.size()); return s; }
};

enum Status : std::uint64_t { ok = 0, failed = 1, aborted = 2 };

struct Outcome {
  Status status = ok;
  ErrorKind kind = ErrorKind::device;
  std::string message;
  Outputs outputs;
  std::vector<LedgerRow> ledger;
  std::vector<Span> spans;
  std::vector<std::uint64_t> notes;  // result: notes sent to each rank; verdict: notes for the receiver
};

// Whether every value of t is a float32 (the blocks of a float32 or bfloat16 run): it then travels
// as float32, half the bytes, and comes back exactly. NaN, infinities beyond float32's range and
// values float32 does not hold keep float64.
bool float_exact(const Tensor& t) {
  for (std::size_t i = 0; i < t.size(); ++i)
    if (static_cast<double>(static_cast<float>(t.data()[i])) != t.data()[i]) return false;
  return true;
}

constexpr std::size_t kChunk = 4096;  // float32 values converted at a time

// `release`: each output tensor is freed once written (a rank sending its results keeps no second
// copy of them beside the message).
std::vector<char> pack(Outcome& o, bool release = false) {
  Writer w;
  std::size_t estimate = 4096;
  for (const auto& [name, t] : o.outputs) estimate += name.size() + 8 * (t.dimension() + 3) + t.size() * sizeof(double);
  w.bytes.reserve(estimate);
  w.u64(o.status);
  w.u64(static_cast<std::uint64_t>(o.kind));
  w.text(o.message);
  w.u64(o.outputs.size());
  for (auto& [name, t] : o.outputs) {
    w.text(name);
    w.u64(t.dimension());
    for (auto d : t.shape()) w.u64(d);
    const bool as_float = float_exact(t);
    w.u64(as_float ? sizeof(float) : sizeof(double));
    if (!as_float) w.raw(t.data(), t.size() * sizeof(double));
    float chunk[kChunk];
    for (std::size_t at = 0; as_float && at < t.size(); at += kChunk) {
      const std::size_t n = std::min(kChunk, t.size() - at);
      for (std::size_t i = 0; i < n; ++i) chunk[i] = static_cast<float>(t.data()[at + i]);
      w.raw(chunk, n * sizeof(float));
    }
    if (release) t = Tensor();
  }
  w.text(serialize(o.ledger));
  w.u64(o.spans.size());
  for (const auto& s : o.spans) {
    w.text(s.name);
    w.text(s.detail);
    w.raw(&s.start_us, sizeof s.start_us);
    w.raw(&s.dur_us, sizeof s.dur_us);
  }
  w.u64(o.notes.size());
  for (auto n : o.notes) w.u64(n);
  return std::move(w.bytes);
}

Outcome unpack(const std::vector<char>& bytes) {
  Reader r{bytes};
  Outcome o;
  o.status = static_cast<Status>(r.u64());
  o.kind = static_cast<ErrorKind>(r.u64());
  o.message = r.text();
  for (std::uint64_t i = 0, n = r.u64(); i < n; ++i) {
    const std::string name = r.text();
    Shape shape(r.u64());
    for (auto& d : shape) d = r.u64();
    Tensor t = xt::zeros<double>(shape);
    const std::uint64_t width = r.u64();
    if (width == sizeof(double)) r.raw(t.data(), t.size() * sizeof(double));
    else if (width != sizeof(float)) throw Error(ErrorKind::device, "a result message from another rank is garbled");
    float chunk[kChunk];
    for (std::size_t at = 0; width == sizeof(float) && at < t.size(); at += kChunk) {
      const std::size_t n = std::min(kChunk, t.size() - at);
      r.raw(chunk, n * sizeof(float));
      for (std::size_t i = 0; i < n; ++i) t.data()[at + i] = chunk[i];
    }
    o.outputs.emplace(name, std::move(t));
  }
  o.ledger = deserialize(r.text());
  o.spans.resize(r.u64());
  for (auto& s : o.spans) {
    s.name = r.text();
    s.detail = r.text();
    r.raw(&s.start_us, sizeof s.start_us);
    r.raw(&s.dur_us, sizeof s.dur_us);
  }
  o.notes.resize(r.u64());
  for (auto& n : o.notes) n = r.u64();
  return o;
}

// Receives one message of any length from `source` (or any) with `tag`, yielding while waiting.
// `idle` runs between polls (rank 0's deadlock watch). `what` says what is awaited, for the
// sentence of a wait past the collective timeout.
std::vector<char> receive(int source, int tag, MPI_Comm comm, const std::string& what, int* from = nullptr,
                          const std::function<void()>& idle = nullptr) {
  const Deadline deadline;
  for (int spin = 0;; ++spin) {
    int flag = 0;
    MPI_Status st;
    mpi_check(MPI_Iprobe(source, tag, comm, &flag, &st), "MPI_Iprobe");
    if (flag) {
      int n = 0;
      MPI_Get_count(&st, MPI_BYTE, &n);
      std::vector<char> buf(n);
      mpi_check(MPI_Recv(buf.data(), n, MPI_BYTE, st.MPI_SOURCE, tag, comm, MPI_STATUS_IGNORE), "MPI_Recv");
      if (from) *from = st.MPI_SOURCE;
      return buf;
    }
    if (idle) idle();
    if (spin % 64 == 63 && deadline.passed()) mpi_harness_timeout(MpiProcess::get().rank(), deadline.waited(), what);
    MpiProcess::get().idle(spin);
  }
}

void send(const std::vector<char>& bytes, int to, int tag, MPI_Comm comm) {
  if (bytes.size() > static_cast<std::size_t>(INT32_MAX))
    throw Error(ErrorKind::unsupported, "a device's outputs are larger than one MPI message can carry here");
  mpi_check(MPI_Send(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, to, tag, comm), "MPI_Send");
}


void throw_if_failed(const Outcome& v) {
  if (v.status != ok) throw Error(v.kind, v.message);
}

// Every rank has reached this run; a rank that already left (its program ended early on rank 0
// only, say) makes it fail on every rank instead of hanging in MPI_Comm_create_group. The go message is
// empty, or the reason the run cannot start.
void enter(MpiProcess& p, const MpiRun& run) {
  if (p.size() == 1) return;
  const int enter_tag = p.run_tag(run.epoch(), MpiProcess::enter), go_tag = p.run_tag(run.epoch(), MpiProcess::go);
  if (p.rank() != 0) {
    send({}, 0, enter_tag, p.harness());
    const auto why = receive(0, go_tag, p.harness(), "for device 0 to start the next run");
    if (!why.empty()) throw Error(ErrorKind::device, std::string(why.begin(), why.end()));
    return;
  }
  // Rank 0 waits for every rank at once, so a wait past the timeout names all that have not come.
  std::string why;
  std::vector<bool> waiting(p.size(), true);
  waiting[0] = false;
  const Deadline deadline;
  for (int spin = 0;; ++spin) {
    std::vector<int> missing;
    for (int r = 1; r < p.size(); ++r) {
      if (!waiting[r]) continue;
      int flag = 0;
      mpi_check(MPI_Iprobe(r, enter_tag, p.harness(), &flag, MPI_STATUS_IGNORE), "MPI_Iprobe");
      if (flag) {
        receive(r, enter_tag, p.harness(), "");
        waiting[r] = false;
      } else if (p.left_early(r)) {
        why = "device " + std::to_string(r) + " stopped before this run began";
        waiting[r] = false;
      } else {
        missing.push_back(r);
      }
    }
    if (missing.empty()) break;
    if (spin % 64 == 63 && deadline.passed())
      mpi_harness_timeout(0, deadline.waited(), "for " + mpi_devices(missing) + " to reach the next run");
    p.idle(spin);
  }
  for (int r = 1; r < p.size(); ++r) send(std::vector<char>(why.begin(), why.end()), r, go_tag, p.harness());
  if (!why.empty()) throw Error(ErrorKind::device, why);
}

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()), out;
  for (char c : raw) out += c == '\0' ? ' ' : c;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out.empty() ? "<program>" : out;
}

}  // namespace

void start() { MpiProcess::get(); }
void stop() {}
bool is_root() { return MpiProcess::get().rank() == 0; }
int rank() { return MpiProcess::get().rank(); }
int world_size() { return MpiProcess::get().size(); }
int agree(int status) { return MpiProcess::get().agree(status); }

std::string library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, len), out;
  for (char c : s.substr(0, s.find('\n')))  // "MPICH Version:\t4.0.2" -> "MPICH Version: 4.0.2"
    if (!(std::isspace(static_cast<unsigned char>(c)) && (out.empty() || out.back() == ' '))) out += std::isspace(static_cast<unsigned char>(c)) ? ' ' : c;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

void check_world(const Mesh& mesh) {
  MpiProcess& p = MpiProcess::get();
  if (p.size() == mesh.devices()) return;
  const std::string n = std::to_string(mesh.devices());
  const std::string fix = "; run: mpiexec -n " + n + " " + command_line();
  if (!p.launched())
    throw Error(ErrorKind::world_size, "mesh " + mesh.text() + " needs " + n +
                                           " processes, but this one was not started by mpiexec" + fix);
  throw Error(ErrorKind::world_size, "mesh " + mesh.text() + " needs " + n + " processes, mpiexec started " +
                                         std::to_string(p.size()) + fix);
}

RunResult run(const Mesh& mesh, const SpmdProgram& program, bool native, DType dtype, bool trace, const Fault& fault) {
  MpiProcess& p = MpiProcess::get();
  check_world(mesh);
  MpiRun run(p, p.next_epoch());
  enter(p, run);
  MpiTransport transport(run, mesh, p.comms(mesh), p.rank());
  Outcome mine;
  {
    Device dev(p.rank(), mesh, transport, native, dtype);
    dev.set_fault(fault);
    auto fail = [&](ErrorKind kind, const std::string& message) {
      mine.status = failed;
      mine.kind = kind;
      mine.message = message;
      run.abort_others();
    };
    if (trace) set_trace_spans(&dev.spans());
    try {
      mine.outputs = program(dev);
      if (dev.struck()) mine.outputs[kFaultStruck] = xt::ones<double>({1});
      transport.finish_sends();  // a send nobody takes shows as a stuck device, named
    } catch (const MpiAborted&) {
      mine.status = aborted;  // another rank failed first; its error is the one reported
    } catch (const Error& e) {
      fail(e.kind(), e.what());
    } catch (const std::exception& e) {
      fail(ErrorKind::device, "device " + std::to_string(p.rank()) + " failed: " + e.what());
    } catch (...) {
      fail(ErrorKind::device, "device " + std::to_string(p.rank()) + " failed with an unknown exception");
    }
    set_trace_spans(nullptr);
    mine.ledger = dev.ledger().rows();
    mine.spans = std::move(dev.spans());
  }
  run.finished();
  mine.notes = run.notes_sent();

  const int result_tag = p.run_tag(run.epoch(), MpiProcess::result);
  const int verdict_tag = p.run_tag(run.epoch(), MpiProcess::verdict);
  if (p.rank() != 0) {
    send(pack(mine, true), 0, result_tag, p.harness());
    const Outcome verdict = unpack(receive(0, verdict_tag, p.harness(), "for device 0's verdict on the run"));
    run.drain_notes(verdict.notes.at(0));
    if (verdict.status != ok) p.after_failure();
    throw_if_failed(verdict);
    stop_point("verify", p.rank());  // testing: stopped while rank 0 checks the result
    return {};
  }

  std::vector<Outcome> all(p.size());
  all[0] = std::move(mine);
  std::string deadlock;
  std::vector<bool> heard(p.size(), false);
  for (int left = p.size() - 1; left > 0; --left) {
    std::vector<int> missing;  // for the sentence of a wait past the collective timeout
    for (int r = 1; r < p.size(); ++r)
      if (!heard[r]) missing.push_back(r);
    const std::string what = "for the results of " + mpi_devices(missing);
    int from = 0;
    auto bytes = receive(MPI_ANY_SOURCE, result_tag, p.harness(), what, &from, [&] {
      const std::string d = run.monitor();
      if (!d.empty()) deadlock = d;
    });
    all[from] = unpack(bytes);
    heard[from] = true;
  }
  all[0].notes = run.notes_sent();  // with any abort sent while collecting
  // The reported error: the lowest rank's own failure, else the deadlock rank 0 found.
  Outcome verdict;
  for (const auto& o : all)
    if (o.status == failed) {
      verdict = o;
      break;
    }
  if (verdict.status == ok && !deadlock.empty()) {
    verdict.status = failed;
    verdict.kind = ErrorKind::mismatch;
    verdict.message = deadlock;
  }
  if (verdict.status == ok) {
    std::vector<LedgerRow> rows;
    for (const auto& o : all) rows.insert(rows.end(), o.ledger.begin(), o.ledger.end());
    const std::string unmatched = unmatched_messages(rows);
    if (!unmatched.empty()) {
      verdict.status = failed;
      verdict.kind = ErrorKind::mismatch;
      verdict.message = unmatched;
    }
  }
  if (verdict.status == ok)
    for (std::size_t r = 0; r < all.size(); ++r)
      if (all[r].status != ok) {
        verdict.status = failed;
        verdict.message = "device " + std::to_string(r) + " was stopped without a reason";
        break;
      }
  verdict.outputs.clear();
  verdict.ledger.clear();
  verdict.spans.clear();
  for (int r = 0; r < p.size(); ++r) {
    verdict.notes.assign(1, 0);
    for (const auto& o : all) verdict.notes[0] += o.notes.at(r);
    if (r == 0) run.drain_notes(verdict.notes[0]);
    else send(pack(verdict), r, verdict_tag, p.harness());
  }
  if (verdict.status != ok) p.after_failure();
  throw_if_failed(verdict);

  RunResult result;
  for (auto& o : all) {
    result.outputs.push_back(std::move(o.outputs));
    result.ledger.insert(result.ledger.end(), o.ledger.begin(), o.ledger.end());
    if (trace) result.spans.push_back(std::move(o.spans));
  }
  return result;
}

}  // namespace shardlab::mpi_module

extern "C" const shardlab::mpi_module::Table* shardlab_mpi_module() {
  namespace m = shardlab::mpi_module;
  static const m::Table table = {m::kTableVersion, m::start, m::stop,  m::is_root,         m::rank,
                                 m::world_size,    m::check_world, m::run, m::agree, m::library_version,
                                 m::mpich_collectives};
  return &table;
}
