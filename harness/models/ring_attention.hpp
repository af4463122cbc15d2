// Ring attention (context parallelism; lesson 19 and `shardlab ring-attention`): one causal
// attention head whose sequence of S = 2n c tokens is cut into 2n chunks of c over a ring of n
// devices. Each device keeps its queries; keys and values go round the ring by collective_permute
// (a shift by one, n - 1 times) and are folded in with the online softmax; the backward sends K, V
// round again with the dK, dV partial sums, which one more shift brings home.
//
//   order contiguous  device i holds chunks 2i, 2i+1 (causal work grows with i)
//   order balanced    device i holds chunks i, 2n-1-i (every device 2n + 1 unmasked blocks)
//
// Bytes per device, B = one device's [2c, d] block in the wire's type:
//   forward 2(n-1) B; backward (4(n-1) + 2) B.
// FLOPs per unmasked c x c block: 4 c^2 d forward (q k^T, p v), 10 c^2 d backward.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/runtime.hpp"
#include "core/dtype.hpp"
#include "core/tensor.hpp"
#include "harness/check/verify.hpp"
#include "harness/cost/cost.hpp"

namespace shardlab {

enum class RingOrder { contiguous, balanced };
RingOrder parse_ring_order(const std::string& text);  // "contiguous" | "balanced"; else Error(parse)
std::string ring_order_name(RingOrder o);

struct RingConfig {
  int devices = 4;
  std::size_t chunk = 8;  // c: tokens per chunk
  std::size_t head = 16;  // d: the head size
  std::uint64_t seed = 0;
  std::size_t tokens() const { return 2 * std::size_t(devices) * chunk; }
  std::size_t block_elements() const { return 2 * chunk * head; }  // one device's [2c, d]
};
// Error(parse), one sentence, for a ring under 2 devices or a chunk or head of 0; Error(unsupported)
// for a ring of more than kMaxRingDevices (the sim's n - 1 steps of n threads grow as n^2 on a
// few cores), for S^2 d above kMaxRingWork (the reference and its tolerances at 2^24 already take
// seconds: S = 1024 with d = 16 or S = 512 with d = 64), or for more memory than the machine has
// (ring_run_bytes).
constexpr int kMaxRingDevices = 32;
constexpr double kMaxRingWork = 16777216.0;  // 2^24
void check_ring(const RingConfig& c);
// Bytes a sim run holds at once, in float64: q, k, v, dO [S, d], plain attention's reference
// (plain_attention_bytes) and n devices' peaks (ring_peak_bytes).
std::size_t ring_run_bytes(const RingConfig& c);
// One device's peak, by formula: 9 blocks [2c, d] (q, k, v, o, dO, dq, dk, dv and one incoming),
// the statistics m, l [2c] and two [c, c] blocks of scores (s and p).
std::size_t ring_peak_bytes(const RingConfig& c, std::size_t element_bytes);

// The two chunks device i holds.
std::vector<std::size_t> ring_chunks(RingOrder o, int i, int n);

struct RingInputs {
  Tensor q, k, v, dout;  // [S, d], uniform in [-1, 1], rounded to the run's element type
};
RingInputs ring_inputs(const RingConfig& c, DType t);

// One device's program, over mesh axis `axis`: outputs o, dq, dk, dv (its two chunks' rows, in
// chunk order), flops [forward, backward] and peak_bytes (the elements its arrays held at the
// peak times the device's element size). Its compute steps are trace spans.
Outputs ring_attention_device(Device& dev, const RingInputs& in, const RingConfig& c, RingOrder o,
                              const std::string& axis);

std::size_t ring_forward_bytes(const RingConfig& c, std::size_t element_bytes);
std::size_t ring_backward_bytes(const RingConfig& c, std::size_t element_bytes);
// Plain attention on one device: q k v o dO dq dk dv [S, d], P and dS [S, S], two statistics [S].
std::size_t plain_attention_bytes(const RingConfig& c, std::size_t element_bytes);

// O, dQ, dK, dV of one run against unsharded causal attention in float64, each with a tolerance
// per element: 32 (S + d + 4) eps times the sum of |terms| of the element, and for dK and dV u of
// the wire's type times each partial sum carried round the ring. Names "<prefix>O" and so on.
std::vector<Verdict> ring_attention_checks(const RunResult& run, const RingInputs& in, const RingConfig& c,
                                           RingOrder o, DType wire, const std::string& prefix);

// The cost model's forward ring step at S tokens on n devices with a model width w (heads x
// head size): K and V blocks [S/n, w] moved by collective_permute on the preset's wiring, against
// the average step's compute, (2n + 1)/n blocks of 4 (S/2n)^2 w FLOPs (balanced order).
struct RingStepCost {
  double transfer_s = 0, compute_s = 0;
};
RingStepCost ring_step_cost(double tokens, int devices, double width, const Hardware& hw);

}  // namespace shardlab
