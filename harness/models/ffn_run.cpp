// Running the FFN plan: inputs, the SPMD program, the run and its blocks gathered back. The
// checks are in ffn_verify.cpp, the text and JSON pieces of a report in ffn_report.cpp.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <chrono>
#include <ctime>
#include <functional>
#include <type_traits>
#include <cfloat>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include <xtensor-blas/xblas.hpp>
#include <xtensor/xmath.hpp>

#include "collectives/collectives.hpp"
#include "core/blas.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "core/gelu.hpp"
#include "core/layout.hpp"
#include "harness/models/bench_ffn.hpp"
#include "harness/models/case_run_io.hpp"
#include "harness/models/ffn.hpp"
#include "harness/models/ffn_check.hpp"
#include "harness/models/ffn_verify.hpp"
#include "harness/check/gradient_check.hpp"
#include "harness/check/progress.hpp"
#include "harness/check/session.hpp"

namespace shardlab {

template <class T>
FfnInputsOf<T> ffn_inputs_as(const FfnDims& d, std::uint64_t seed, bool backward) {
  // Each tensor from its own seed, so they can be drawn side by side.
  using Gen = std::function<xt::xarray<T>()>;
  std::vector<Gen> gens = {
      [&] { return random_integers_as<T>({d.m, d.h}, seed + 1, -2, 2, 1.0 / 8); },
      [&] { return random_integers_as<T>({d.h, d.m}, seed + 2, -2, 2, 1.0 / 8); },
      [&] { return random_integers_as<T>({d.b, d.s, d.m}, seed, -2, 2); }};
  if (backward) gens.push_back([&] { return random_integers_as<T>({d.b, d.s, d.m}, seed + 3, -2, 2); });
  std::vector<xt::xarray<T>> made = on_all_cores(gens);
  FfnInputsOf<T> in;
  in.w_in = std::move(made[0]);
  in.w_out = std::move(made[1]);
  in.x = std::move(made[2]);
  if (backward) in.r = std::move(made[3]);
  return in;
}
template FfnInputsOf<double> ffn_inputs_as<double>(const FfnDims&, std::uint64_t, bool);
template FfnInputsOf<float> ffn_inputs_as<float>(const FfnDims&, std::uint64_t, bool);
template FfnInputsOf<bfloat16> ffn_inputs_as<bfloat16>(const FfnDims&, std::uint64_t, bool);

FfnInputs ffn_inputs(const FfnDims& d, std::uint64_t seed) { return ffn_inputs_as<double>(d, seed, true); }

std::string parse_verify_mode(const std::string& text) {
  if (text == "full" || text == "sketch" || text == "auto") return text;
  throw Error(ErrorKind::parse, "--verify '" + text + "' is not one of full|sketch|auto");
}

namespace {

// Each device's final blocks (and, for a sketch, the intermediates h, g, dg, dh as they were when
// freed), by name. On sim the program moves its blocks here, in their own type, instead of
// returning them as float64 Outputs.
template <class T>
using Blocks = std::vector<std::map<std::string, xt::xarray<T>>>;

bool intermediate(const std::string& t) { return t == "h" || t == "g" || t == "dg" || t == "dh"; }

template <class T>
SpmdProgram typed_program(const FfnPlan& plan, const FfnInputsOf<T>& in, Blocks<T>* sink, bool keep_intermediates) {
  return [&plan, &in, sink, keep_intermediates](Device& dev) -> Outputs {
    const Mesh& mesh = dev.mesh();
    const int id = dev.id();
    std::map<std::string, xt::xarray<T>> held;  // this device's live blocks, by tensor name
    held["x"] = local_block(in.x, mesh, plan.specs.x, id);
    held["W_in"] = local_block(in.w_in, mesh, plan.specs.w_in, id);
    held["W_out"] = local_block(in.w_out, mesh, plan.specs.w_out, id);
    if (plan.config.backward) held["dy"] = local_block(in.r, mesh, plan.specs.y, id);
    Outputs out;
    auto hand_over = [&](const std::string& name, xt::xarray<T>&& t) {
      if (sink) (*sink)[static_cast<std::size_t>(id)][name] = std::move(t);
      else out[name] = converted<double>(t);
    };

    // Memory: the bytes of every block this device holds, read from the tensors themselves at each
    // stage boundary; while a contraction or reshard runs, plus its transient buffers (gathered
    // operands, the product and each step's new buffer: execute_plan keeps them until it returns),
    // whose sizes the plan's steps give. Elementwise stages count their new tensors as measured.
    auto live = [&held] {
      std::size_t n = 0;
      for (const auto& kv : held) n += kv.second.size() * sizeof(T);
      return n;
    };
    std::size_t stored = live(), peak = stored;
    for (const auto& s : plan.stages) {
      const std::size_t before = live();
      switch (s.kind) {
        case FfnStage::Kind::reshard: {
          peak = std::max(peak, before + s.extra_bytes);
          // Gathers and free slices; the planner's own steps, so a dim that does not divide moves
          // each block's real rows (or the padded blocks) as --uneven says.
          xt::xarray<T> t = execute_steps(dev, s.steps, held.at(s.out));
          held[s.out] = std::move(t);
          break;
        }
        case FfnStage::Kind::contraction:
          peak = std::max(peak, before + s.extra_bytes);
          held[s.out] = execute_plan(dev, s.plan, held.at(s.in[0]), held.at(s.in[1]));
          break;
        case FfnStage::Kind::gelu:
          held[s.out] = gelu_as(held.at("h"));
          peak = std::max(peak, live());
          break;
        case FfnStage::Kind::gelu_backward: {
          held[s.out] = gelu_backward_as(held.at("dg"), held.at("h"));
          peak = std::max(peak, live());
          break;
        }
      }
      for (const auto& t : s.frees) {
        if (keep_intermediates && intermediate(t)) hand_over(t, std::move(held.at(t)));
        held.erase(t);
      }
      stored = std::max(stored, live());
    }
    for (const char* name : {"y", "dx", "dW_in", "dW_out"})
      if (held.count(name)) hand_over(name, std::move(held.at(name)));
    // --inject perturb:E where the blocks skip the returned Outputs (the runtime perturbs those).
    if (sink && dev.strike(FaultKind::perturb))
      for (auto& [name, t] : (*sink)[static_cast<std::size_t>(id)]) perturb_block(t.data(), t.size(), dev.fault().size);
    out["peak_bytes"] = Tensor({static_cast<double>(peak)});
    out["stored_bytes"] = Tensor({static_cast<double>(stored)});
    return out;
  };
}

}  // namespace

SpmdProgram ffn_program(const FfnPlan& plan, const FfnInputs& in) {
  return typed_program<double>(plan, in, nullptr, false);
}

bool FfnResult::pass() const {
  if (checks.empty()) return false;
  for (const auto& c : checks)
    if (!c.pass || is_weak(c, plan.config.dtype)) return false;  // WEAK fails (docs/verification.md)
  for (const auto& c : collectives)
    if (!c.matches()) return false;
  return true;
}

namespace {


std::size_t largest(const RunResult& run, const std::string& name) {
  double m = 0;
  for (const auto& o : run.outputs) {
    auto it = o.find(name);
    if (it != o.end() && it->second.size()) m = std::max(m, it->second.data()[0]);
  }
  return static_cast<std::size_t>(m);
}

// The spec each kept tensor had when the program handed it over: intermediates when freed,
// outputs at the end.
std::map<std::string, Spec> specs_handed_over(const FfnPlan& plan) {
  std::map<std::string, Spec> cur, at;
  for (const auto& s : plan.stages) {
    cur[s.out] = s.out_spec;
    for (const auto& t : s.frees) at[t] = cur[t];
  }
  for (const auto& kv : cur)
    if (!at.count(kv.first)) at[kv.first] = kv.second;
  return at;
}

// The global tensor from every device's block (replicas compared bit for bit).
template <class T>
xt::xarray<T> gather_global(const Mesh& mesh, const Spec& spec, const Shape& global, Blocks<T>& blocks,
                            const std::string& name, std::string& disagreement) {
  xt::xarray<T> out = xt::empty<T>(global);
  std::map<std::vector<std::size_t>, int> first;  // block start -> first device holding it
  for (int d = 0; d < mesh.devices(); ++d) {
    auto it = blocks[static_cast<std::size_t>(d)].find(name);
    if (it == blocks[static_cast<std::size_t>(d)].end())
      throw Error(ErrorKind::device, "device " + std::to_string(d) + " returned no block named " + name);
    const xt::xarray<T>& mine = it->second;
    const Block b = block_of(mesh, spec, global, d);
    if (shape_of(mine) != b.stored_shape())
      throw Error(ErrorKind::rank_mismatch, "device " + std::to_string(d) + " holds " + name + " block " +
                                                shape_text(shape_of(mine)) + ", expected " + shape_text(b.stored_shape()));
    auto [at, fresh] = first.emplace(b.start, d);
    if (fresh && b.padded()) {  // --uneven pad: only the real elements, at the front of each dim
      Block front;
      front.start.assign(b.start.size(), 0);
      front.stop = b.shape();
      xt::xarray<T> real = xt::empty<T>(b.shape());
      take_block(mine.data(), b.stored_shape(), front, real.data());
      put_block(out.data(), global, b, real.data());
    } else if (fresh) {
      put_block(out.data(), global, b, mine.data());
    } else if (disagreement.empty()) {
      const xt::xarray<T>& earlier = blocks[static_cast<std::size_t>(at->second)].at(name);
      if (std::memcmp(mine.data(), earlier.data(), mine.size() * sizeof(T)) != 0)  // bit for bit
        disagreement = "replicas of " + name + " disagree: devices " + std::to_string(at->second) + " and " +
                       std::to_string(d) + " hold different values for block " + b.text();
    }
  }
  return out;
}

// User + system CPU seconds of every thread of this process: what a step costs whatever else shares the cores.
double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// The inputs of a run: generated (and read from --inputs), or the set the previous run kept when
// both share them (FfnConfig::share_inputs) with the same dims, seed, passes and file. Called from
// the thread that runs run_ffn, one run at a time.
template <class T>
std::shared_ptr<const FfnInputsOf<T>> run_inputs(const FfnConfig& c) {
  struct Kept {
    std::string key;
    std::shared_ptr<const FfnInputsOf<T>> in;
  };
  static Kept kept;
  const std::string key = ffn_dims_text(c.dims) + " seed " + std::to_string(c.seed) + (c.backward ? " dy " : " ") + c.inputs;
  if (c.share_inputs && kept.in && kept.key == key) return kept.in;
  kept = Kept{};  // a kept set freed before the next is made
  auto in = std::make_shared<FfnInputsOf<T>>(ffn_inputs_as<T>(c.dims, c.seed, c.backward));
  read_ffn_inputs(*in, c.inputs, c.dtype, c.backward);  // a lesson's --inputs
  if (c.share_inputs) kept = Kept{key, in};
  return in;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <class T>
FfnResult run_typed(const std::function<RunResult(const SpmdProgram&)>& runner, Runtime& runtime, const FfnPlan& plan) {
  const Backend backend = runtime.backend();
  const bool root = runtime.is_root();
  const FfnConfig& c = plan.config;
  FfnResult r;
  r.plan = plan;
  r.forward_collectives = plan.collectives(FfnPhase::forward).size();
  r.verify = c.verify == "auto" ? (plan.unsharded_flops() <= ffn_full_verify_flops ? "full" : "sketch") : c.verify;
  const bool sketch = r.verify == "sketch";

  auto t0 = std::chrono::steady_clock::now();
  std::optional<progress::Phase> shown;  // the phase on the progress display (progress.hpp); emplace ends the last
  shown.emplace("generating inputs x, W_in, W_out" + std::string(c.backward ? ", R" : ""));
  const std::shared_ptr<const FfnInputsOf<T>> inputs = run_inputs<T>(c);
  const FfnInputsOf<T>& in = *inputs;
  r.seconds_inputs = seconds_since(t0);

  const Mesh& mesh = plan.mesh;
  Blocks<T> blocks(static_cast<std::size_t>(mesh.devices()));
  double expected = c.expected_run_seconds;
  if (expected <= 0 && progress::enabled() && plan.unsharded_flops() > 1e10)  // ~0.1 s to measure
    expected = ffn_floor_seconds(plan, single_core_gemm_gflops(dtype_name(c.dtype)));
  shown.emplace("sharded run on " + std::to_string(mesh.devices()) + " devices", expected);
  t0 = std::chrono::steady_clock::now();
  // On sim the blocks come back through a sink in their own type (no float64 copies at article
  // size); a replayed run (bfloat16, collectives/replay.hpp) returns them as Outputs, which the
  // runtime compares with the replay's (a sink would be written by both runs).
  const bool sink = backend == Backend::sim && !runtime.replaying();
  RunResult run = runner(typed_program<T>(plan, in, sink ? &blocks : nullptr, sketch));
  r.seconds_run = seconds_since(t0);
  // Warm steps, as a training loop runs them: the inputs already generated and in place, the
  // allocator holding the memory the first step faulted in (core/memory.hpp), each step's results
  // handed to one sink whose blocks the next step replaces. Every rank runs them (they are
  // collective); the first run alone is verified.
  if (c.steps > 0) {
    shown.emplace(std::to_string(c.steps) + " warm steps on " + std::to_string(mesh.devices()) + " devices",
                  expected * c.steps);
    Blocks<T> warm(static_cast<std::size_t>(mesh.devices()));
    for (int s = 0; s < c.steps; ++s) {
      const auto ts = std::chrono::steady_clock::now();
      const double cpu = process_cpu_seconds();
      runner(typed_program<T>(plan, in, sink ? &warm : nullptr, false));
      r.seconds_steps.push_back(seconds_since(ts));
      r.cpu_seconds_steps.push_back(process_cpu_seconds() - cpu);
    }
  }
  if (!root) return r;

  shown.emplace(r.verify + " verification against the unsharded layer");
  t0 = std::chrono::steady_clock::now();
  r.collectives = summarize(run.ledger);
  r.bytes_per_device = largest_device_total(run.ledger);
  r.peak_bytes_per_device = largest(run, "peak_bytes");
  r.stored_bytes_per_device = largest(run, "stored_bytes");
  if (!sink)  // blocks came back as float64 Outputs: exact in T again (each float64 copy freed once converted)
    for (std::size_t dv = 0; dv < run.outputs.size(); ++dv)
      for (auto& [name, t] : run.outputs[dv])
        if (!is_bookkeeping(name)) {
          blocks[dv][name] = converted<T>(t);
          t = Tensor();
        }

  std::map<std::string, xt::xarray<T>> got;
  std::string disagreement;
  const FfnDims& d = c.dims;
  const std::map<std::string, Shape> shapes = {{"h", {d.b, d.s, d.h}},      {"g", {d.b, d.s, d.h}},
                                               {"dg", {d.b, d.s, d.h}},     {"dh", {d.b, d.s, d.h}},
                                               {"y", {d.b, d.s, d.m}},      {"dx", {d.b, d.s, d.m}},
                                               {"dW_in", {d.m, d.h}},       {"dW_out", {d.h, d.m}}};
  const auto specs = specs_handed_over(plan);
  for (const auto& [name, shape] : shapes)
    if (!blocks.empty() && blocks[0].count(name)) {
      got[name] = gather_global(mesh, specs.at(name), shape, blocks, name, disagreement);
      for (auto& b : blocks) b.erase(name);  // free each device's copy once gathered
    }
  if (sketch) verify_sketch(r, plan, in, got);
  else verify_full(r, plan, in, got);
  if (!disagreement.empty()) {
    Verdict v;
    v.name = "replicas agree";
    v.pass = false;
    v.detail = disagreement;
    r.checks.push_back(v);
  }
  // The gradient rules, by central differences on the program (float64, inputs of their own):
  // keep them to small layers.
  if (c.backward && c.finite_differences && plan.unsharded_flops() <= 2e6)
    for (const auto& v : ffn_rule_checks(d, c.seed)) r.checks.push_back(v);
  // The run's collectives are the plan's, in order, with the predicted bytes.
  Verdict agree;
  agree.name = "collectives as planned";
  agree.detail = ffn_plan_vs_ledger(plan, r.collectives);
  agree.pass = agree.detail.empty();
  r.checks.push_back(agree);
  Verdict memory;
  memory.name = "memory as planned";
  memory.pass = r.peak_bytes_per_device == plan.peak_bytes_per_device &&
                r.stored_bytes_per_device == plan.stored_bytes_per_device;
  if (!memory.pass)
    memory.detail = "devices held at most " + std::to_string(r.stored_bytes_per_device) + " bytes (peak " +
                    std::to_string(r.peak_bytes_per_device) + "); the plan says " +
                    std::to_string(plan.stored_bytes_per_device) + " (peak " +
                    std::to_string(plan.peak_bytes_per_device) + ")";
  r.checks.push_back(memory);
  r.seconds_verify = seconds_since(t0);
  return r;
}

FfnResult run_any(const std::function<RunResult(const SpmdProgram&)>& runner, Runtime& runtime, const Mesh& mesh,
                  FfnConfig config, DType dtype) {
  config.dtype = dtype;  // the element type the devices move is the one the plan counts
  parse_verify_mode(config.verify);
  const FfnPlan plan = plan_ffn(mesh, config);
  switch (dtype) {
    case DType::float64: return run_typed<double>(runner, runtime, plan);
    case DType::float32: return run_typed<float>(runner, runtime, plan);
    case DType::bfloat16: return run_typed<bfloat16>(runner, runtime, plan);
  }
  throw Error(ErrorKind::unsupported, "unknown element type");
}

}  // namespace

FfnResult run_ffn(Runtime& runtime, const Mesh& mesh, const FfnConfig& config) {
  return run_any([&](const SpmdProgram& p) { return runtime.run(mesh, p); }, runtime, mesh, config, runtime.dtype());
}

FfnResult run_ffn(Session& session, const FfnConfig& config) {
  FfnResult r =
      run_any([&](const SpmdProgram& p) { return session.run(p); }, session.runtime(), session.mesh(), config,
              session.dtype());
  auto& checks = session.report().checks;
  checks.insert(checks.end(), r.checks.begin(), r.checks.end());
  return r;
}

}  // namespace shardlab
