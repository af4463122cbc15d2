#include "collectives/runtime.hpp"

#include <algorithm>
#include <cstring>
#include <iomanip>
#include <sstream>

#include <cstdlib>
#include <memory>
#include <thread>

#include "collectives/mpi.hpp"
#include "collectives/sim.hpp"
#include "core/blas.hpp"
#include "core/memory.hpp"
#include "core/error.hpp"
#include "core/trace.hpp"

namespace shardlab {

Backend parse_backend(const std::string& text) {
  if (text == "sim") return Backend::sim;
  if (text == "mpi") return Backend::mpi;
  throw Error(ErrorKind::parse, "backend '" + text + "' is not known; use sim or mpi");
}

std::string backend_name(Backend b) { return b == Backend::sim ? "sim" : "mpi"; }

bool process_is_root() {
  for (const char* var : {"PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK"}) {
    const char* v = std::getenv(var);
    if (v) return std::string(v) == "0";
  }
  return true;
}

int launched_processes() {
  for (const char* var : {"PMI_SIZE", "PMIX_SIZE", "OMPI_COMM_WORLD_SIZE"})
    if (const char* v = std::getenv(var)) return std::atoi(v);
  return 0;
}

int processes_on_these_cores() {
  if (const char* c = std::getenv("SHARDLAB_CROWDED"); c && std::string(c) == "1") return launched_processes();
  if (const char* v = std::getenv("MPI_LOCALNRANKS")) return std::atoi(v);
  return launched_processes();
}

Runtime::Runtime(Backend backend, bool native, DType dtype)
    : backend_(backend), native_(native), dtype_(dtype), replay_(dtype == DType::bfloat16) {
  use_one_blas_thread();
  keep_freed_memory();  // core/memory.hpp: each step's tensors reuse memory instead of faulting in pages
  if (backend_ == Backend::mpi) mpi::start();
}

Runtime::~Runtime() {
  if (backend_ == Backend::mpi) mpi::stop();
}

bool Runtime::is_root() const { return backend_ == Backend::sim || mpi::is_root(); }

void Runtime::check_mesh(const Mesh& mesh) const {
  if (backend_ == Backend::mpi) mpi::check_world(mesh);
}

int Runtime::agree(int status) const { return backend_ == Backend::sim ? status : mpi::agree(status); }

namespace {

// Everything a device thread touches, owned jointly by the threads and run_sim: when a device
// never finishes (stuck in its own computation past the collective timeout), run_sim reports the
// fault and leaves that thread running detached, still owning what it uses.
struct SimRun {
  SimRun(const Mesh& m, const SpmdProgram& p, int n) : mesh(m), program(p), world(n) {}
  Mesh mesh;
  SpmdProgram program;
  SimWorld world;
  std::vector<std::unique_ptr<SimTransport>> transports;
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<Outputs> outputs;
};

RunResult run_sim(const Mesh& mesh, const SpmdProgram& program, DType dtype, bool trace, const Fault& fault,
                  bool replaying = false) {
  const int n = mesh.devices();
  auto run = std::make_shared<SimRun>(mesh, program, n);
  for (int d = 0; d < n; ++d) {
    run->transports.push_back(std::make_unique<SimTransport>(run->world, d));
    run->devices.push_back(std::make_unique<Device>(d, run->mesh, *run->transports[d], false, dtype));
    run->devices.back()->set_fault(fault);
    run->devices.back()->set_replaying(replaying);
  }
  run->outputs.resize(n);
  std::vector<std::thread> threads;
  for (int d = 0; d < n; ++d) {
    threads.emplace_back([run, d, trace] {
      SimWorld& world = run->world;
      if (trace) set_trace_spans(&run->devices[d]->spans());
      try {
        run->outputs[d] = run->program(*run->devices[d]);
      } catch (const Aborted&) {
        // another device failed first; its error is the one reported
      } catch (...) {
        world.fail(d, std::current_exception());
      }
      set_trace_spans(nullptr);
      world.finish(d);
    });
  }
  // After a failure the others stop at their next wait; one that never waits again is left behind.
  if (run->world.wait_finished(std::chrono::seconds(1))) {
    for (auto& t : threads) t.join();
  } else {
    for (auto& t : threads) t.detach();
  }
  SimWorld& world = run->world;
  if (const std::exception_ptr error = world.take_first_error()) std::rethrow_exception(error);
  RunResult result;
  result.outputs = std::move(run->outputs);
  for (const auto& dev : run->devices) {
    if (dev->struck()) result.outputs[static_cast<std::size_t>(dev->id())][kFaultStruck] = xt::ones<double>({1});
    result.ledger.insert(result.ledger.end(), dev->ledger().rows().begin(), dev->ledger().rows().end());
    if (trace) result.spans.push_back(std::move(dev->spans()));
  }
  const std::string unmatched = unmatched_messages(result.ledger);
  if (!unmatched.empty()) throw Error(ErrorKind::mismatch, unmatched);
  return result;
}

// perturb:E on the root, after the run: one element of each block the last device returned. A
// block of zeros only is left alone: under --uneven pad it may be all padding (a device with no
// real rows), where the change would reach nothing checked and the run would pass.
bool perturb_last_device(RunResult& r, double e) {
  if (r.outputs.empty()) return false;
  bool struck = false;
  for (auto& [name, t] : r.outputs.back())
    if (!is_bookkeeping(name) && std::any_of(t.begin(), t.end(), [](double v) { return v != 0; })) {
      perturb_block(t.data(), t.size(), e);
      struck = true;
    }
  return struck;
}

// The run's outputs against the replay's, bit for bit (NaN payloads and the sign of zero too).
ReplayRecord compare_replay(const RunResult& run, const RunResult& replay) {
  ReplayRecord rec;
  auto differ = [&rec](const std::string& what) {
    if (rec.identical) rec.detail = what;
    rec.identical = false;
  };
  if (run.outputs.size() != replay.outputs.size()) differ("the replay ran on another number of devices");
  for (std::size_t d = 0; d < run.outputs.size() && d < replay.outputs.size(); ++d) {
    const Outputs &got = run.outputs[d], &want = replay.outputs[d];
    for (const auto& [name, w] : want)
      if (!is_bookkeeping(name) && !got.count(name)) differ("device " + std::to_string(d) + " did not return " + name);
    for (const auto& [name, g] : got) {
      if (is_bookkeeping(name)) continue;  // memory, time and order counts: not values
      const auto it = want.find(name);
      if (it == want.end()) {
        differ("device " + std::to_string(d) + " returned " + name + ", which the replay did not");
        continue;
      }
      const Tensor& w = it->second;
      ++rec.tensors;
      rec.elements += g.size();
      if (g.shape() != w.shape()) {
        differ("device " + std::to_string(d) + "'s " + name + " has shape " + shape_text(shape_of(g)) +
               ", the replay's " + shape_text(shape_of(w)));
        continue;
      }
      for (std::size_t i = 0; i < g.size(); ++i)
        if (std::memcmp(&g.data()[i], &w.data()[i], sizeof(double)) != 0) {
          std::ostringstream what;
          what << std::setprecision(9) << "device " << d << "'s " << name << " element " << i << ": " << g.data()[i]
               << ", the replay's " << w.data()[i];
          differ(what.str());
          break;
        }
    }
  }
  return rec;
}

}  // namespace

RunResult Runtime::run(const Mesh& mesh, const SpmdProgram& program) {
  if (native_ && backend_ == Backend::sim)
    throw Error(ErrorKind::unsupported, "--collectives native needs the mpi backend (MPICH's own collectives)");
  RunResult r = backend_ == Backend::mpi ? mpi::run(mesh, program, native_, dtype_, tracing_, fault_)
                                         : run_sim(mesh, program, dtype_, tracing_, fault_);
  for (auto& out : r.outputs)
    if (out.erase(kFaultStruck)) struck_ = true;
  if (fault_.kind == FaultKind::perturb && is_root()) struck_ = perturb_last_device(r, fault_.size) || struck_;
  if (replaying() && is_root()) {
    RunResult again = run_sim(mesh, program, dtype_, false, Fault{}, true);
    for (auto& out : again.outputs) out.erase(kFaultStruck);
    replays_.push_back(compare_replay(r, again));
  }
  if (tracing_ && is_root()) trace_.push_back(TraceRun{r.ledger, r.spans});
  return r;
}

}  // namespace shardlab
