// Adam written a second time, plainly, to check the shared Adam::step (training.hpp) inside the
// lessons that use it (15 ZeRO, 17 3D). The sharded run and its reference both step with
// Adam::step, so a wrong moment or bias correction there would agree with itself; this version
// follows Kingma and Ba's Algorithm 1 element by element, with beta^t by repeated products.
#pragma once
#include <string>
#include <vector>

#include "core/tensor.hpp"
#include "harness/check/verify.hpp"
#include "harness/models/training.hpp"

namespace shardlab {

// Step t of Adam on the first w.size() elements of a weight: w, m, v hold those elements (m and v
// start at 0); g is the whole gradient.
void plain_adam(std::vector<double>& w, std::vector<double>& m, std::vector<double>& v, const Tensor& g, int t,
                const AdamParams& p);

// The first elements of `w` (after `steps` steps of Adam::step) against the plain Adam's `plain`:
// the same double arithmetic in another order, so within 16 steps u (|w| + 1) of each element.
// Named "Adam's step on N elements of <weight> against Adam written plainly".
Verdict adam_against_plain(const std::string& weight, const std::vector<double>& plain, const Tensor& w, int steps);

}  // namespace shardlab
