// Verification: a sharded result against the unsharded one computed in the same program.
// Data movement must match bit for bit (tolerance 0); sums not exact in the type get per-element
// bounds from the program checker (program_check.hpp) or, where a model keeps its own reference,
// from its own derivation; reduction_tolerance() is Higham's worst case for a plain sum.
#pragma once
#include <string>
#include <vector>

#include "collectives/runtime.hpp"
#include "core/mesh.hpp"
#include "core/spec.hpp"
#include "core/tensor.hpp"

namespace shardlab {

struct Verdict {
  std::string name;        // what was checked, e.g. "C"
  bool pass = true;
  double max_abs_error = 0;
  double tolerance = 0;     // with a tolerance per element: the largest of them
  // With a tolerance per element: the largest |got - want| / tol over the elements (1 = at the
  // limit; an error where the tolerance is 0 makes it infinite). Negative: one scalar tolerance.
  double worst_ratio = -1;
  std::string detail;      // first bad index or replica disagreement, empty on PASS
  // Power: the smallest error in one element that this check is guaranteed to catch, relative
  // to the RMS of the expected values: max over elements of (tol_i + |got_i - want_i|) / RMS.
  // 0 for an exact check; infinite when want is all zeros and the tolerance is not. Negative:
  // not measured (a check that is not a comparison of values).
  double power = -1;
  // tol_i / |want_i| over the elements with want_i != 0 (median and largest; a sample of 2^20
  // evenly spaced elements for larger tensors): how a tolerance compares with what it guards.
  double tol_over_value_median = 0, tol_over_value_max = 0;
  // The power this check must reach to be trusted; negative: power_floor() of the run's element
  // type. A finite-difference check of the gradient rules has its own (gradient_check.hpp).
  double floor = -1;
  // Covered by a replay (Runtime::replays, collectives/replay.hpp): every run of the session gave
  // the same outputs as its replay bit for bit, so one element of this tensor changed by the
  // sharded path is caught whatever its size: power 0. rounding_power keeps the power of the
  // comparison with the unsharded reference, which then bounds only the rounding of the type.
  bool replayed = false;
  double rounding_power = -1;
  // The values left the element type's range: the reference or the run holds inf or NaN. No
  // tolerance judges such a comparison, so it fails with its own verdict (detail says where).
  bool overflow = false;
  // What a check that does not measure a power (power < 0) compares, when it is not exact
  // equality: "catches a gate off by more than u|g|". Empty: any difference fails it (a count, a
  // byte total, a list of collectives), and its lines say "exact, no tolerance".
  std::string claim;
  // The one line of a check, after "name: ", always with its power (power_phrase):
  // "PASS (exact, no tolerance)", "FAIL (exact, no tolerance); ran all_gather ...",
  // "FAIL max_abs_err=5 (exact, no tolerance); first bad index [1, 2]: got 8, want 6",
  // "PASS max_abs_err=0.5 (catches 2.1 x RMS; tol 0.5)", and with a tolerance per element
  // "PASS max_abs_err=0.01 (catches 0.3 x RMS; worst err/tol 0.25, tol per element up to 0.2)".
  std::string line() const;
};

// A check's power in the words every verdict line uses (docs/verification.md):
//   "exact, no tolerance"    no tolerance: one element or count off by any amount fails it
//   "exact by replay"        replayed (cover_by_replays): any element the sharded path changed fails
//   "catches 3.7e-06 x RMS"  a tolerance: one element off by more than power x RMS fails it
//   its claim                a check with a tolerance and no power of its own says what it catches
// Never "0 x RMS": a power of 0 is exact.
std::string power_phrase(const Verdict& v);
// The same for a table's column headed "catches": "exact", "exact by replay", "3.7e-06 x RMS" or
// the claim.
std::string power_cell(const Verdict& v);

// The weakest power a check of element type t may have and still be trusted: float64 1e-9,
// float32 1e-3, bfloat16 3e-2 (times the RMS of the checked values).
double power_floor(DType t);
// v's own floor when it has one, else power_floor(t).
double floor_for(const Verdict& v, DType t);
// A passing comparison of values whose power is above its floor (or NaN): a wrong answer that
// small could pass it. weak_text: "WEAK: sure to catch only an element off by 0.31 x RMS; floor 0.03".
bool is_weak(const Verdict& v, DType t);
std::string weak_text(const Verdict& v, DType t);

// The checks of a session whose runs were replayed (bfloat16): adds one check, "replay", that every
// run's outputs equal its replay's bit for bit, and when they do marks every comparison of values
// (not the finite-difference checks of the gradient rules) `replayed`, with power 0. Applied once
// per session: a second call only updates the replay check.
inline constexpr const char* kReplayCheck = "replay (the same program, collectives from their definitions)";
void cover_by_replays(std::vector<Verdict>& checks, const std::vector<ReplayRecord>& replays);

// Folds one part's check into a check of several (a model's weights, say): it passes only if every
// part does; its error and tolerance are the largest of theirs; its detail is the first failing
// part's, after `label` and ": ".
void absorb(Verdict& whole, const Verdict& part, const std::string& label);

// Both compares fail a comparison whose values overflowed (inf or NaN in want or got) with
// `overflow` set, whatever the tolerance: "overflow: the reference holds inf at [0, 1] ...".
Verdict compare(const std::string& name, const Tensor& got, const Tensor& want, double tolerance = 0.0);
// Each element against its own tolerance (same shape as want): passes iff |got_i - want_i| <= tol_i
// for every i. The first bad index names its tolerance.
Verdict compare(const std::string& name, const Tensor& got, const Tensor& want, const Tensor& tolerance);

// The rounding error of one contraction of `terms` products whose local partial sums, one per
// device of a group of `group` devices, are added in element type t (group = 1: one device, no
// reduction). Elementwise, with A and B the operands as the devices hold them,
//     |computed - exact| <= product * (|A| |B|) + result * |computed|.
// Each product passes at most `terms` roundings of the compute arithmetic (u_c; any order,
// Higham's gamma_terms). float32, float64: the group's adds are group - 1 more roundings in the
// same arithmetic, so product = gamma_{terms + group - 1}(u) and result = 0. bfloat16: the local
// sum is rounded to bfloat16 and each add of the group rounds again (u_t = 2^-8); every rounding
// but the last touches a partial sum whose terms are a subset of the product's, so they add
// gamma_{group - 1}(u_t) relative to |A| |B| (Higham's Lemma 3.3 combines the two gammas), while
// the last rounding is relative to the result itself: result = u_t / (1 - u_t).
// Flush to zero (core/dtype.hpp): a product, partial sum or result below the type's smallest
// normal L becomes 0, an error of at most L each, not relative to anything; a term whose operand
// was flushed is off by at most L times the other operand's magnitude, and the operands' own
// bounds (E_A, E_B) carry that. One run rounds at most 2 terms + group times, each error grown by
// at most the relative factor after it: absolute = (2 terms + group) L (1 + product + result).
struct GemmRounding {
  double product = 0, result = 0;
  double absolute = 0;  // elementwise, added to |computed - exact|
};
GemmRounding gemm_rounding(DType t, std::size_t terms, std::size_t group = 1);

// Tolerance for comparing two sums of the same `terms` numbers added in different orders (the
// sharded sum adds local partial sums, then combines them over the ring; the reference adds
// left to right). Each ordering is a recursive summation, whose error is at most
// (terms-1) * u * sum|x_i| with u = DBL_EPSILON/2 (Higham, Accuracy and Stability, eq. 4.4).
// Two such sums differ by at most twice that, and sum|x_i| <= terms * max_abs_term, so
//     tol = 2 * (terms-1) * u * terms * max_abs_term = (terms-1) * DBL_EPSILON * terms * max_abs_term.
// Integer inputs whose sums stay below 2^53 are exact; then the error is 0 and any tol passes.
double reduction_tolerance(std::size_t terms, double max_abs_term);
// The same for sums held in element type t (unit roundoff u = unit_roundoff(t)): float64 is the
// formula above; float32 and bfloat16 also round partial sums moved between devices and the stored
// result in t. Each side adds `terms` products in its compute arithmetic (unit roundoff u_c:
// float32's for both) and stores a partial sum in t at most devices + 1 times (the local result,
// each ring step of a ReduceScatter, the result), each within u_t of a value no larger than
// terms * max_abs_term; each product and rounding may also flush a value below the smallest
// normal L to zero (core/dtype.hpp), at most L each:
//     tol = 2 (terms u_c + (devices + 1) u_t) terms max_abs_term + 2 (2 terms + devices + 1) L.
double reduction_tolerance(std::size_t terms, double max_abs_term, DType t, int devices = 1);
// Integers whose sum stays within the type's exact integers (2^53, 2^24, 2^8): every order gives
// the same sum, so 0; otherwise reduction_tolerance.
double integer_sum_tolerance(std::size_t terms, double max_abs_term, DType t, int devices = 1);

// Stitch output `name` from every device's block under `spec` (replicas must agree bit for bit)
// and compare with `want`.
Verdict verify_output(const Mesh& mesh, const Spec& spec, const RunResult& run, const std::string& name,
                      const Tensor& want, double tolerance = 0.0);
// The same with a tolerance per element (same shape as want).
Verdict verify_output(const Mesh& mesh, const Spec& spec, const RunResult& run, const std::string& name,
                      const Tensor& want, const Tensor& tolerance);

}  // namespace shardlab
