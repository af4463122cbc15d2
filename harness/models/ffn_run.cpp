// Running the FFN plan: inputs, the SPMD program, the checks (the full one through
// ffn_check.hpp), and the text and JSON pieces of a report.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <chrono>
#include <functional>
#include <type_traits>
#include <cfloat>
#include <cmath>
#include <map>
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
#include "harness/models/ffn.hpp"
#include "harness/models/ffn_check.hpp"
#include "harness/check/gradient_check.hpp"
#include "harness/check/progress.hpp"
#include "harness/check/session.hpp"
#include "harness/check/sketch.hpp"
#include "core/table.hpp"
#include "harness/check/plan_ledger.hpp"

namespace shardlab {

namespace {

template <class T>
double max_abs_of(const xt::xarray<T>& t) {
  double m = 0;
  for (std::size_t i = 0; i < t.size(); ++i) m = std::max(m, std::fabs(element_cast<double>(t.data()[i])));
  return m;
}



}  // namespace

namespace {
// Runs the tasks on every core (results in task order): independent checks and generators.
template <class R>
std::vector<R> on_all_cores(const std::vector<std::function<R()>>& tasks) {
  std::vector<R> out(tasks.size());
  std::atomic<std::size_t> next{0};
  std::mutex mu;
  std::exception_ptr failed;  // the first task that threw; rethrown here after every thread is done
  auto work = [&] {
    for (std::size_t i; (i = next++) < tasks.size();) {
      try {
        out[i] = tasks[i]();
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failed) failed = std::current_exception();
      }
    }
  };
  const unsigned n = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), tasks.size()));
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < n; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  if (failed) std::rethrow_exception(failed);
  return out;
}
}  // namespace

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
Program typed_program(const FfnPlan& plan, const FfnInputsOf<T>& in, Blocks<T>* sink, bool keep_intermediates) {
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
          const xt::xarray<T> slope = gelu_grad_as(held.at("h"));
          held[s.out] = multiply_as(held.at("dg"), slope);
          peak = std::max(peak, live() + slope.size() * sizeof(T));
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

Program ffn_program(const FfnPlan& plan, const FfnInputs& in) { return typed_program<double>(plan, in, nullptr, false); }

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

template <class T>
MatRef<float> as_float(const xt::xarray<T>& t, std::vector<xt::xarray<float>>& keep, std::size_t rows, bool transposed) {
  keep.push_back(converted<float>(t));
  return {keep.back().data(), rows, t.size() / rows, transposed};
}

// Sketch of one stage c = op(a) op(b), all held as [rows, cols] (a batch-and-sequence dim folded
// into rows), whose k-term sums were added over a group of `group` devices. Each element of an
// honest c is within rho (|op(A)| |op(B)|)_ij + q |c_ij| of the exact product (gemm_rounding in
// verify.hpp: the products in T's compute arithmetic, the partial sums added and rounded in T);
// sketch_product applies that to |v| row by row. `exact`: the stage's sums are exact on the 1/8 grid
// (ffn_check.hpp) in T, so rho = q = 0; `compute_exact`: in T's compute arithmetic, so only the
// roundings to T remain (gemm_rounding of 0 terms). kRows rows of c are also recomputed exactly
// and compared element by element with the same rho and q (check_rows, sketch.hpp); `one_in` is
// the fraction of rows (1/devices) whose miss probability the rows line prints.
template <class T>
Verdict sketch_stage(const std::string& name, const xt::xarray<T>& c, std::size_t c_rows, const xt::xarray<T>& a,
                     std::size_t a_rows, bool ta, const xt::xarray<T>& b, std::size_t b_rows, bool tb, std::size_t k,
                     std::size_t group, bool exact, std::uint64_t seed, std::size_t one_in, bool compute_exact = false) {
  constexpr std::size_t kVectors = 20;
  constexpr std::size_t kRows = 64;  // rows recomputed exactly (check_rows): 64/rows of the stage's GEMM, twice (A B and abs)
  const GemmRounding g = exact ? GemmRounding{} : gemm_rounding(dtype_of<T>(), compute_exact ? 0 : k, group);
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
    // float32: the row tolerance calibrated on rows recomputed as the plan sums them (sketch.hpp).
    const std::size_t calibrate = std::is_same_v<T, float> && !exact && !compute_exact ? group : 0;
    return sketch_product<T>(name, {c.data(), c_rows, c.size() / c_rows}, {a.data(), a_rows, a.size() / a_rows, ta},
                             {b.data(), b_rows, b.size() / b_rows, tb}, g.product, kVectors, seed, g.result, kRows,
                             one_in, calibrate);
  } else {
    std::vector<xt::xarray<float>> keep;
    keep.reserve(3);
    const MatRef<float> fc = as_float(c, keep, c_rows, false), fa = as_float(a, keep, a_rows, ta),
                        fb = as_float(b, keep, b_rows, tb);
    return sketch_product<float>(name, fc, fa, fb, g.product, kVectors, seed, g.result, kRows, one_in);
  }
}

template <class T>
Verdict exact_stage(const std::string& name, const xt::xarray<T>& got, const xt::xarray<T>& want) {
  Verdict v;
  v.name = name;
  v.detail = "every element, bit for bit (the same function in the same type on both sides)";
  v.power = 0;  // every element compared exactly: any wrong one fails
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double p = element_cast<double>(got.data()[i]), q = element_cast<double>(want.data()[i]);
    if (!(p == q) && !(std::isnan(p) && std::isnan(q))) {
      v.pass = false;
      v.max_abs_error = std::max(v.max_abs_error, std::fabs(p - q));
      if (v.detail.rfind("first", 0) != 0)
        v.detail = "first bad element " + std::to_string(i) + ": got " + shortest(p) + ", want " + shortest(q);
    }
  }
  return v;
}

// Full verification: the unsharded layer as a program, checked as every program is
// (ffn_check.hpp: checked_reference's values and bounds, every element compared).
template <class T>
void verify_full(FfnResult& r, const FfnPlan& plan, const FfnInputsOf<T>& in, std::map<std::string, xt::xarray<T>>& got) {
  std::map<std::string, Tensor> inputs = {
      {"x", converted<double>(in.x)}, {"W_in", converted<double>(in.w_in)}, {"W_out", converted<double>(in.w_out)}};
  if (plan.config.backward) inputs["dy"] = converted<double>(in.r);
  std::map<std::string, Tensor> whole;
  for (const char* name : {"y", "dx", "dW_in", "dW_out"})
    if (got.count(name)) whole[name] = converted<double>(got.at(name));
  struct AllCores {  // back to one BLAS thread per device however the check ends
    AllCores() { use_all_blas_threads(); }
    ~AllCores() { use_one_blas_thread(); }
  };
  std::vector<Verdict> checks;
  {
    const AllCores cores;
    checks = ffn_full_checks(plan, inputs, whole);
  }
  for (auto& v : checks) r.checks.push_back(std::move(v));
}


// Sketch verification: each stage against its own (sharded, gathered) inputs.
template <class T>
void verify_sketch(FfnResult& r, const FfnPlan& plan, const FfnInputsOf<T>& in,
                   std::map<std::string, xt::xarray<T>>& got) {
  const FfnConfig& c = plan.config;
  const FfnDims& d = c.dims;
  const std::size_t bs = d.b * d.s;
  const FfnGroups n = ffn_reduction_groups(plan);
  // h and dg: exact in T when every element's sum of |terms| is (the 1/8 grid, ffn_check.hpp).
  const DType t = dtype_of<T>();
  const double h_sum = d.m * max_abs_of(in.x) * max_abs_of(in.w_in);
  const double dg_sum = c.backward ? d.m * max_abs_of(in.r) * max_abs_of(in.w_out) : 0.0;
  const bool h_exact = exact_in_eighths(h_sum, t), dg_exact = c.backward && exact_in_eighths(dg_sum, t);
  const bool h_sums_exact = exact_in_eighths(h_sum, t, true), dg_sums_exact = exact_in_eighths(dg_sum, t, true);
  const std::uint64_t seed = c.seed * 7919 + 17;  // drawn before looking at any result
  // A wrong device block covers at least 1/devices of a result's rows: the rows line prints the
  // chance of missing an error that large.
  const std::size_t one_in = static_cast<std::size_t>(plan.mesh.devices());
  // The stages are independent checks: run them on every core.
  using Check = std::function<Verdict()>;
  std::vector<Check> checks = {
      [&] { return sketch_stage("h = x W_in (sketch)", got.at("h"), bs, in.x, bs, false, in.w_in, d.m, false, d.m, n.h, h_exact, seed, one_in, h_sums_exact); },
      [&] { return exact_stage("g = gelu(h) (every element)", got.at("g"), gelu_as(got.at("h"))); },
      [&] { return sketch_stage("y = g W_out (sketch)", got.at("y"), bs, got.at("g"), bs, false, in.w_out, d.h, false, d.h, n.y, false, seed + 1, one_in); }};
  if (c.backward) {
    checks.push_back([&] { return sketch_stage("dg = dy W_out^T (sketch)", got.at("dg"), bs, in.r, bs, false, in.w_out, d.h, true, d.m, n.dg, dg_exact, seed + 2, one_in, dg_sums_exact); });
    checks.push_back([&] { return sketch_stage("dW_out = g^T dy (sketch)", got.at("dW_out"), d.h, got.at("g"), bs, true, in.r, bs, false, bs, n.dw_out, false, seed + 3, one_in); });
    checks.push_back([&] { return exact_stage("dh = dg * gelu'(h) (every element)", got.at("dh"), multiply_as(got.at("dg"), gelu_grad_as(got.at("h")))); });
    checks.push_back([&] { return sketch_stage("dx = dh W_in^T (sketch)", got.at("dx"), bs, got.at("dh"), bs, false, in.w_in, d.m, true, d.h, n.dx, false, seed + 4, one_in); });
    checks.push_back([&] { return sketch_stage("dW_in = x^T dh (sketch)", got.at("dW_in"), d.m, in.x, bs, true, got.at("dh"), bs, false, bs, n.dw_in, false, seed + 5, one_in); });
  }
  std::vector<Verdict> verdicts = on_all_cores(checks);
  for (auto& v : verdicts) r.checks.push_back(std::move(v));
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <class T>
FfnResult run_typed(const std::function<RunResult(const Program&)>& runner, Runtime& runtime, const FfnPlan& plan) {
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
  const FfnInputsOf<T> in = ffn_inputs_as<T>(c.dims, c.seed, c.backward);
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
  const RunResult run = runner(typed_program<T>(plan, in, sink ? &blocks : nullptr, sketch));
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
      runner(typed_program<T>(plan, in, sink ? &warm : nullptr, false));
      r.seconds_steps.push_back(seconds_since(ts));
    }
  }
  if (!root) return r;

  shown.emplace(r.verify + " verification against the unsharded layer");
  t0 = std::chrono::steady_clock::now();
  r.collectives = summarize(run.ledger);
  r.bytes_per_device = largest_device_total(run.ledger);
  r.peak_bytes_per_device = largest(run, "peak_bytes");
  r.stored_bytes_per_device = largest(run, "stored_bytes");
  if (!sink)  // blocks came back as float64 Outputs: exact in T again
    for (std::size_t dv = 0; dv < run.outputs.size(); ++dv)
      for (const auto& [name, t] : run.outputs[dv])
        if (!is_bookkeeping(name)) blocks[dv][name] = converted<T>(t);

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

FfnResult run_any(const std::function<RunResult(const Program&)>& runner, Runtime& runtime, const Mesh& mesh,
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

Verdict sketch_contraction(const std::string& name, const Tensor& c, const Tensor& a, const Tensor& b, std::size_t terms,
                           std::size_t group, DType t, std::uint64_t seed, std::size_t one_in) {
  const std::size_t c_rows = c.size() / c.shape().back(), a_rows = a.size() / a.shape().back(), b_rows = b.shape()[0];
  switch (t) {
    case DType::float32:
      return sketch_stage<float>(name, converted<float>(c), c_rows, converted<float>(a), a_rows, false,
                                 converted<float>(b), b_rows, false, terms, group, false, seed, one_in);
    case DType::bfloat16:
      return sketch_stage<bfloat16>(name, converted<bfloat16>(c), c_rows, converted<bfloat16>(a), a_rows, false,
                                    converted<bfloat16>(b), b_rows, false, terms, group, false, seed, one_in);
    default:
      return sketch_stage<double>(name, c, c_rows, a, a_rows, false, b, b_rows, false, terms, group, false, seed, one_in);
  }
}

std::string ffn_plan_vs_ledger(const FfnPlan& plan, const std::vector<CollectiveSummary>& run) {
  Plan all;
  for (const auto& s : plan.stages) {
    const auto& steps = s.kind == FfnStage::Kind::contraction ? s.plan.steps : s.steps;
    all.steps.insert(all.steps.end(), steps.begin(), steps.end());
  }
  return plan_vs_ledger(all, run);
}

FfnResult run_ffn(Runtime& runtime, const Mesh& mesh, const FfnConfig& config) {
  return run_any([&](const Program& p) { return runtime.run(mesh, p); }, runtime, mesh, config, runtime.dtype());
}

FfnResult run_ffn(Session& session, const FfnConfig& config) {
  FfnResult r =
      run_any([&](const Program& p) { return session.run(p); }, session.runtime(), session.mesh(), config, session.dtype());
  auto& checks = session.report().checks;
  checks.insert(checks.end(), r.checks.begin(), r.checks.end());
  return r;
}

std::string ffn_collectives_table(const FfnResult& r) {
  if (r.collectives.empty()) return "  no collectives: 0 bytes moved between devices\n";
  Table t({"#", "pass", "collective", "over", "tensor", "group", "bytes/device", "predicted", "match"});
  for (std::size_t i = 0; i < r.collectives.size(); ++i) {
    const auto& c = r.collectives[i];
    t.add({std::to_string(i + 1), i < r.forward_collectives ? "forward" : "backward", c.op, c.axes, c.tensor,
           std::to_string(c.group_size), measured_cell(c), std::to_string(c.predicted_bytes_per_device),
           match_cell(c)});
  }
  return t.text();
}

std::string ffn_memory_text(const FfnResult& r) {
  const FfnPlan& p = r.plan;
  const int n = p.mesh.devices();
  auto ratio = [](double a, double b) { return b > 0 ? shortest(std::round(a / b * 1000) / 1000) : "-"; };
  std::ostringstream o;
  o << "  memory per device: held " << human_bytes(static_cast<double>(r.stored_bytes_per_device)) << ", peak "
    << human_bytes(static_cast<double>(r.peak_bytes_per_device)) << " with the short-lived gathered copies\n"
    << "  unsharded layer:   held " << human_bytes(static_cast<double>(p.unsharded_stored_bytes)) << ", peak "
    << human_bytes(static_cast<double>(p.unsharded_peak_bytes)) << "; per device / unsharded = "
    << ratio(static_cast<double>(r.stored_bytes_per_device), static_cast<double>(p.unsharded_stored_bytes))
    << " held, " << ratio(static_cast<double>(r.peak_bytes_per_device), static_cast<double>(p.unsharded_peak_bytes))
    << " peak (1/" << n << " = " << ratio(1, n) << ")\n"
    << "  FLOPs per device:  " << shortest(p.flops_per_device()) << " of " << shortest(p.unsharded_flops()) << " unsharded = 1/"
    << shortest(p.unsharded_flops() / p.flops_per_device()) << " of the matmul work"
    << (p.flops_per_device() * n == p.unsharded_flops() ? " (every device a unique share)" : " (some work repeated)")
    << "\n";
  return o.str();
}

void ffn_report_fields(const FfnResult& r, Report& report) {
  const FfnPlan& p = r.plan;
  report.strings["strategy"] = p.strategy.name;
  report.strings["dims"] = ffn_dims_text(p.config.dims);
  report.strings["forward"] = ffn_collectives_summary(p, FfnPhase::forward);
  if (p.config.backward) report.strings["backward"] = ffn_collectives_summary(p, FfnPhase::backward);
  report.numbers["forward_collectives"] = static_cast<double>(r.forward_collectives);
  report.numbers["backward_collectives"] = static_cast<double>(p.collectives(FfnPhase::backward).size());
  report.numbers["predicted_bytes_per_device"] = static_cast<double>(p.predicted_bytes_per_device());
  report.numbers["peak_memory_per_device"] = static_cast<double>(r.peak_bytes_per_device);
  report.numbers["stored_memory_per_device"] = static_cast<double>(r.stored_bytes_per_device);
  report.numbers["unsharded_peak_memory"] = static_cast<double>(p.unsharded_peak_bytes);
  report.numbers["unsharded_stored_memory"] = static_cast<double>(p.unsharded_stored_bytes);
  report.numbers["flops_per_device"] = p.flops_per_device();
  report.numbers["unsharded_flops"] = p.unsharded_flops();
}

}  // namespace shardlab
