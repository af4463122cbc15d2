// A case's tensors to and from files (harness/check/npz.hpp): its inputs read from the arrays a
// case file or --inputs names, and --save's arrays, the sharded run's outputs and gradients
// assembled from the devices with the unsharded reference's beside them; and, for a run on a
// user's own values, which tensor and element set the check's power.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "collectives/runtime.hpp"
#include "harness/check/case_file.hpp"
#include "harness/check/program_check.hpp"
#include "harness/models/ffn.hpp"
#include "harness/plan/program_plan.hpp"

namespace shardlab {

// Where a run's inputs came from, for its report.
struct InputsUsed {
  std::string source;                     // the .npz or folder; empty: every input generated
  std::vector<std::string> read;          // "W_q (float32)", in the program's order
  std::vector<std::string> generated;     // inputs no array names
  std::vector<std::string> unused;        // arrays that name no input
  std::string text() const;               // one or two lines for people; "" when nothing was read
};

// The inputs of the planned program `p` (a backward case's includes each output's upstream
// gradient dy): each array of c.input_files named as one, its shape checked against p's (Error
// rank_mismatch) and every value finite (Error io); the rest program_inputs(p, c.seed)'s. An
// input file naming none of the inputs is refused (Error io): it is surely not this case's.
std::map<std::string, Tensor> case_inputs(const CaseFile& c, const TensorProgram& p, InputsUsed* used = nullptr);

// A lesson's or model's named input tensors from `path` (a .npz or folder; nothing when empty):
// each tensor the arrays name is replaced by its array, rounded to `dtype` (the run stores it so),
// after its shape is checked (Error rank_mismatch) and its values (Error io, non-finite). Error(io)
// when the arrays name none of them. Returns the lines InputsUsed::text() prints ("" when empty).
std::string read_named_inputs(const std::string& path, const std::vector<std::pair<std::string, Tensor*>>& tensors,
                              DType dtype);
// An FFN's x, W_in, W_out and (backward) dy, its R, from `path`, as read_named_inputs.
template <class T>
void read_ffn_inputs(FfnInputsOf<T>& in, const std::string& path, DType dtype, bool backward);
// The same over program_inputs(p, seed): a program's inputs with those `path` names read from it.
std::map<std::string, Tensor> program_inputs_from(const std::string& path, const TensorProgram& p, std::uint64_t seed);

// The element that sets an output check's power (verify.hpp: max over i of (tol_i + |err_i|) /
// RMS): on a user's values, an outlier's element usually.
struct PowerLimit {
  std::string tensor, index;  // "dW_q", "[3, 1, 2]"
  double power = 0, tolerance = 0, error = 0, value = 0, rms = 0;
  std::string text() const;   // "dW_q at [3, 1, 2]: tolerance 0.0029 + error 1e-05 against RMS 0.81 ..."
};
PowerLimit power_limit(const std::string& tensor, const Tensor& got, const Tensor& want, const Tensor& tolerance);

// Every output of the run assembled from the devices' blocks (root only), by name.
std::map<std::string, Tensor> assembled_outputs(const ProgramPlan& plan, const RunResult& run);

// --save's arrays: each output (a backward case: the forward outputs, then every input's
// gradient) as the sharded run assembled it, each upstream gradient dy the backward started
// from, then "ref/<name>" for each output as the unsharded reference computed it.
std::vector<std::pair<std::string, Tensor>> saved_arrays(const ProgramPlan& plan, const std::map<std::string, Tensor>& got,
                                                         const std::map<std::string, Tensor>& inputs,
                                                         const ProgramReference& ref);

}  // namespace shardlab
