// Article 004's ZeRO example, run: three layers La, Lb, Lc (weights A, B, C, each [D, D]) trained
// with Adam on N devices, each with its own micro-batch x_d. Every weight is cut by rows into N
// slices (a0, a1, a2 for A on 3 devices); device d owns slice d of every weight and of the state
// that goes with it. Four ways to hold them, each its own SPMD program:
//   dp     everything whole on every device; one AllReduce per weight gradient
//   zero1  optimizer states (Adam's m and v) split: ReduceScatter the gradients, step the own
//          slice, AllGather the new weights
//   zero2  gradients split too: each layer's gradient is reduce-scattered as soon as backward
//          makes it, and the whole one dropped
//   zero3  weights split too: AllGather a layer's weights before its forward, drop them after,
//          gather them again for its backward; ReduceScatter its gradient
// The model: h1 = tanh(x A), h2 = tanh(h1 B), y = h2 C; loss L = mean over devices of
// sum(y_d * R_d), so the summed device gradients are the gradient of L.
#pragma once
#include "harness/check/verify.hpp"
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/runtime.hpp"
#include "core/dtype.hpp"
#include "core/mesh.hpp"
#include "harness/models/training.hpp"

namespace shardlab {

enum class ZeroMode { dp, zero1, zero2, zero3 };
std::string zero_mode_name(ZeroMode m);   // "plain DP", "ZeRO-1", ...
std::string zero_mode_label(ZeroMode m);  // "dp", "z1", ... (prefix of its ledger labels)

struct ZeroModel {
  std::size_t width = 12;       // D: every weight is [D, D]
  std::size_t micro_batch = 2;  // rows of x on each device
  int steps = 3;                // Adam steps
  AdamParams adam;
  // D rows that do not divide the devices: none refuses; chunk gives the first devices
  // ceil(D/N) rows and the last fewer (all_gather_v, reduce_scatter_v); pad gives every device
  // ceil(D/N) rows, zeros after the real ones, moved by the even collectives. Padding has zero
  // gradients, so Adam never moves it; the outputs keep it (assemble() reads the real rows).
  Uneven uneven = Uneven::none;
};
// Real rows of each device's slice of D rows (torch.chunk's rule; the same under pad, which
// stores ceil(D/N) for each).
std::vector<std::size_t> zero_slice_rows(const ZeroModel& m, int devices);

struct ZeroInputs {
  std::array<Tensor, 3> weights;  // A, B, C at the start
  std::vector<Tensor> x, r;       // per device: micro-batch [b, D] and loss weights R [b, D]
};

// Error(not_divisible) when D does not split over the devices and m.uneven is none.
ZeroInputs zero_inputs(const ZeroModel& m, int devices, std::uint64_t seed);
// The unsharded run: the whole batch on one model, `steps` Adam steps: A, B, C at the end, and a
// tolerance per element for a run whose collectives moved element type `wire` (unit roundoff u):
// each step the weight rounds by (|W| + lr) u, and a gradient element by a multiple of u times the
// sum of its terms' sizes, rho of itself, which moves Adam's update by about lr rho from then on;
// where rho nears 1 the sign is in doubt and the update may differ by 2 lr a step (3 lr allowed).
// Step 1's gradients (of L, summed over the batch) come with 32 u times the sum of their terms'
// sizes as tolerance: unlike the weights, they show a wrong scale (a missing 1/N, say), which
// Adam's normalized step would hide. `doubtful`: weight elements whose gradient was at some step
// within its rounding of 0, where the weight check allows Adam's step either way.
struct ZeroReference {
  std::array<Tensor, 3> weights, tolerance;
  std::array<Tensor, 3> gradient, gradient_tolerance;
  std::size_t doubtful = 0;
  // Each weight's largest doubt of its Adam update over the steps, in units of lr: how far the
  // rounding of its gradients (32 u times the sum of their terms' sizes) may move it through m and
  // v (where it nears 1, the step may go either way).
  std::array<Tensor, 3> doubt;
  // An update was in doubt before the last step: the later forwards and gradients of every weight
  // may differ, so every weight is held only to the plain bound of 3 lr a step.
  bool doubt_spreads = false;
  // The shared Adam::step (training.hpp), which the run and this reference both call, against
  // Adam written plainly, one element at a time: the first elements of A, every step, with the
  // gradients the reference computed. A wrong moment or bias correction fails here, not only in a
  // unit test. Not a comparison of the sharded run: it does not catch a planted fault.
  Verdict adam_scalar;
};
ZeroReference zero_reference(const ZeroModel& m, const ZeroInputs& in, DType wire);

// What one device held at its fullest, in elements: weights, gradients, optimizer state values
// (Adam's m and v). Counted by the program as it keeps and drops whole or sliced tensors (the
// design's bookkeeping, not the allocator's): temporaries such as a slice being stepped are not.
enum ZeroHeld { held_params = 0, held_grads = 1, held_states = 2 };

// The program for one mode. Each device returns "A", "B", "C" (whole weights for dp/zero1/zero2;
// its row slice for zero3), "dA", "dB", "dC" (step 1's summed gradient: whole for dp, the own
// rows otherwise) and "held" (a [3] tensor: peak params, grads, states).
SpmdProgram zero_program(ZeroMode mode, const ZeroModel& m, const ZeroInputs& in);

}  // namespace shardlab
