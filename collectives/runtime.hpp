// Runtime: runs one SPMD program on every device of a mesh and brings back what each device
// returned plus every device's ledger rows.
//   sim: one std::thread per device in this process (the default).
//   mpi: one MPICH process per device: mpiexec -n <devices> build/bin/<program> --backend mpi.
// Outputs and ledgers are collected on the root (the process that prints and verifies): in sim
// the only process, in mpi rank 0. Collection is harness traffic and is not in the ledger.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "collectives/device.hpp"
#include "collectives/fault.hpp"
#include "collectives/ledger.hpp"
#include "core/mesh.hpp"
#include "core/tensor.hpp"

namespace shardlab {

enum class Backend { sim, mpi };
Backend parse_backend(const std::string& text);  // "sim" | "mpi"; else Error(parse)
std::string backend_name(Backend b);

using Outputs = std::map<std::string, Tensor>;  // a device's named local blocks
using SpmdProgram = std::function<Outputs(Device&)>;
// The output a device adds when it planted the run's fault (--inject); Runtime::run removes it.
inline constexpr const char* kFaultStruck = "fault_struck";

struct RunResult {
  std::vector<Outputs> outputs;    // outputs[d] from device d (root only; empty elsewhere)
  std::vector<LedgerRow> ledger;   // every device's rows, by device then call (root only)
  std::vector<std::vector<Span>> spans;  // spans[d]: device d's compute spans, when traced (root only)
};

// One traced run: what harness/check/trace.hpp turns into a timeline.
struct TraceRun {
  std::vector<LedgerRow> ledger;
  std::vector<std::vector<Span>> spans;
};

// A run checked against its replay (collectives/replay.hpp): the same program again on the sim
// backend with every collective computed from its definition, summing in the ring's order, and no
// fault planted. `identical`: every device returned the same outputs, bit for bit.
struct ReplayRecord {
  bool identical = true;
  std::size_t tensors = 0, elements = 0;  // compared, over every device
  std::string detail;                     // the first difference, when not identical
};

class Runtime {
 public:
  // `native`: use the transport's library collectives where it has them (MPI).
  // `dtype`: the element type every device's collectives move.
  explicit Runtime(Backend backend, bool native = false, DType dtype = DType::float64);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  Backend backend() const { return backend_; }
  bool native() const { return native_; }
  DType dtype() const { return dtype_; }
  bool is_root() const;
  // Runs `program` on every device. Throws Error (same kind on every rank) for a bad setup, such
  // as a world size that differs from the mesh, or when any device fails.
  RunResult run(const Mesh& mesh, const SpmdProgram& program);
  // The world-size check of run() on its own (mpi: one process per device; sim: nothing), so that
  // a program can fail with one sentence before it prints anything.
  void check_mesh(const Mesh& mesh) const;
  // Exit status all processes agree on: the largest over ranks (mpi), or `status` (sim).
  int agree(int status) const;
  // --trace: from now on every run records its devices' compute spans, and the root keeps each
  // run's spans and ledger for a timeline (harness/check/trace.hpp).
  void record_trace() { tracing_ = true; }
  // --inject: every later run plants this fault (collectives/fault.hpp); struck() says whether
  // any run has planted it (known on the root).
  void inject(const Fault& f) { fault_ = f; }
  const Fault& fault() const { return fault_; }
  bool struck() const { return struck_; }
  bool tracing() const { return tracing_; }
  // Replay every later run and compare (ReplayRecord). On by default for bfloat16, whose checks
  // against an unsharded reference cannot be tight (every order of rounding differs by more than
  // the power asked of them); off for --collectives native (MPICH sums in orders of its own).
  // The root replays on threads of its own process, also under mpi.
  void set_replay(bool on) { replay_ = on; }
  bool replaying() const { return replay_ && !native_; }
  const std::vector<ReplayRecord>& replays() const { return replays_; }
  const std::vector<TraceRun>& trace() const { return trace_; }

 private:
  Backend backend_;
  bool native_;
  DType dtype_;
  bool tracing_ = false;
  std::vector<TraceRun> trace_;
  Fault fault_;
  bool struck_ = false;
  bool replay_ = false;
  std::vector<ReplayRecord> replays_;
};

// True in the process that should print: any sim process, MPI rank 0. Usable before a Runtime
// exists (reads the launcher's rank variables).
bool process_is_root();
// The process count the launcher (mpiexec) started, from its environment; 0 when not launched.
int launched_processes();
// Of those, the ones that share this machine's cores: hydra's MPI_LOCALNRANKS (one rank per host
// on a real cluster), or all of them when SHARDLAB_CROWDED=1 says the hosts share cores (hosts
// emulated on one machine, tests/cluster/cluster_lib.sh).
int processes_on_these_cores();

}  // namespace shardlab
