// One Adam step on tensors of a user's own (`shardlab adam`): Adam::step (training.hpp), the step
// lessons 15 and 17 take on every device's rows, applied to each parameter of a .npz, checked
// against Adam written plainly (adam_check.hpp) and saved, so that another framework
// (tests/torch/roundtrip.py: torch.optim.Adam) can take the same step and compare.
//
// The arrays: a parameter NAME with its gradient dNAME (the name shardlab run --save gives an
// input's gradient), and its moments m/NAME and v/NAME (Adam's exp_avg and exp_avg_sq after the
// steps before). Moments may be left out only at step 1, where they start at 0. No weight decay.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "harness/check/npz.hpp"
#include "harness/check/verify.hpp"
#include "harness/models/training.hpp"

namespace shardlab {

struct AdamTensor {
  std::string name;
  Tensor w, g, m, v;  // the parameter, its gradient, its moments
};

// Every parameter the arrays name with its gradient, in name order; `unused` gets the arrays that
// are none of NAME, dNAME, m/NAME, v/NAME. Error(io) for no parameter with a gradient, a moment
// without its parameter, one moment without the other, no moments at step > 1, a non-finite value
// or a negative v; Error(rank_mismatch) for a gradient or moment whose shape is not its parameter's.
std::vector<AdamTensor> adam_state_of(const NamedArrays& files, int step, std::vector<std::string>* unused = nullptr);
// Without a file: one parameter W [4, 8] and its gradient, small integers from `seed`, and (step > 1)
// moments m/W in [-0.2, 0.2] and v/W in [0.01, 0.04] (exact binary fractions aside: 0.1 and 0.01 steps).
std::vector<AdamTensor> adam_state_generated(std::uint64_t seed, int step);

// Error(parse) naming the flag for a step outside [1, kAdamMaxStep], lr not above 0, a beta outside
// [0, 1), eps not above 0, or any of them not finite.
constexpr int kAdamMaxStep = 1000000;  // the plain check forms beta^t by t products per element
void check_adam_params(const AdamParams& p, int step);

// Step `step` of Adam::step on each tensor (w, m, v updated in place); each parameter's first
// kAdamChecked elements stepped again by plain_adam (adam_check.hpp) from the same state and
// compared within 16 u (|w| + |update| + 1) each: one verdict per parameter.
constexpr std::size_t kAdamChecked = 256;
std::vector<Verdict> adam_step_all(std::vector<AdamTensor>& state, int step, const AdamParams& p);

// --save's arrays: NAME, m/NAME and v/NAME after the step, for each parameter.
std::vector<std::pair<std::string, Tensor>> adam_saved_arrays(const std::vector<AdamTensor>& state);

}  // namespace shardlab
