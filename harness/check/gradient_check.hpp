// Central differences for a gradient program (harness/plan/gradient.hpp): an independent check of
// the derivation itself. In float64, on inputs of their own (uniform in [-1, 1], so that no value
// sits exactly on a kink of relu or a tie of max), for each forward input x and a few of its
// elements i:
//   D(e) = (L(x + e u_i) - L(x - e u_i)) / 2e,   L = sum over outputs y of sum(y * R_y),
// against the gradient program's dx[i] on the same inputs. The tolerance for element i is
//   |D(2e) - D(e)| + delta / e
// where the first term estimates the truncation error (D(e) is off by about c e^2, D(2e) by 4 c e^2:
// their difference is three times D(e)'s), and delta bounds the rounding of one evaluation of L:
// eps * sum|y R| * (the output elements + the longest sum of the program), of which D(e) is off by
// at most delta / e. A wrong rule is off by the size of the gradient itself. A stop_gradient that
// changes the loss (not a softmax's subtracted max) makes the two disagree, as it should.
#pragma once
#include <cstdint>
#include <vector>

#include "harness/check/verify.hpp"
#include "harness/plan/gradient.hpp"

namespace shardlab {

// The power a finite-difference check must reach (Verdict::floor): float64 central differences
// cannot see below about eps^(2/3) of the loss' scale (truncation e^2 against rounding eps / e),
// which on our programs is 1e-7 of a gradient's RMS for the lessons' sizes and reaches 6e-3 for
// sums over 256 terms. A wrong rule moves a gradient by the order of its own size, so 1e-2 still
// tells a wrong rule from rounding by two orders. (These check the derivation, once per program;
// the sharded run is held to its element type's floor.)
constexpr double kFiniteDifferenceFloor = 1e-2;

// One Verdict per forward input, named "dx vs central differences", over at most `per_input`
// evenly spaced elements. Empty when one evaluation of L would take over `max_flops` (each
// element costs four).
std::vector<Verdict> central_difference_checks(const TensorProgram& forward, const GradientProgram& g,
                                               std::uint64_t seed, std::size_t per_input = 6,
                                               double max_flops = 2e7);

}  // namespace shardlab
