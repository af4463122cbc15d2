// Case files: a program, its mesh, its annotations and what a run must show, in TOML (read with
// toml++). The schema users' files rely on (fields may be added, these never change):
//
//   name = "gspmd_ffn"                                   required
//   mesh = "X=2,Y=4"                                     required
//   dtype = "float32"                                    optional, default float32
//   seed = 0                                             optional
//   dims = { b = 8, s = 4, m = 16, h = 64 }              required: every dim letter used, but for
//                                                        those the input files give
//   inputs_from = "weights.npz"                          optional: a .npz or a folder of NAME.npy
//                                                        (relative to the case file); every input
//                                                        it names is read from it, the rest generated
//   inputs = { x = "bsm", W_in = "mh", W_out = "hm" }    required: input tensors and their dims
//   shard = { x = "X,_,Y", W_in = "X,Y" }                optional: annotations, on any tensor
//   ops = [ { out = "h", op = "einsum", eq = "bsm,mh->bsh", in = ["x", "W_in"] }, ... ]
//                                                        required; reductions and softmax take
//                                                        over = "h", broadcast and rename take
//                                                        to = "bsh", scale and shift value = 0.5
//   outputs = ["y"]                                      required
//   backward = false                                     optional
//   plan = "search"                                      optional: "article" plans each einsum by
//                                                        the articles' rules instead of the search
//   keep_gathered = false                                optional: true keeps the forward's gathered
//                                                        copies for the backward pass instead of
//                                                        gathering them again (fewer bytes, more memory)
//   plan_only = false                                    optional: true for a case too big to run
//                                                        here; its expectations are checked against
//                                                        the plan, and no tensor is built
//   uneven = "chunk"                                     optional, default "chunk": a dim that does not
//                                                        divide its mesh axes splits as torch.chunk, as
//                                                        matmul, einsum and the lessons do; "pad" pads as
//                                                        JAX does; "none" refuses such a dim
//   layouts = "natural"                                  optional: "natural" (every op output lies as
//                                                        propagation puts it, as GSPMD and DTensor do) or
//                                                        "auto" (each lies where the program sends fewest
//                                                        bytes); shard = { s = "auto" } asks it of one tensor
//   ops may say part = "attention": costs are summed by part (shardlab run --preset)
//   [measured]                                           optional: what a source measured
//   source = "article 001, trace of layer 42"
//   comm_share = { attention = 0.29, ffn = 0.15, layer = 0.20 }
//   [expect]                                             optional; each entry is one check
//   collectives = ["all_gather x over Y", ...]           the exact ordered list, forward then backward
//   max_bytes_per_device = 8192                          whole run
//   max_peak_memory_per_device = 65536                   bytes
//
// Anything else (a misspelt key, a value of the wrong type) is refused: Error(parse) with one
// sentence "FILE:LINE: what is wrong".
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/check/npz.hpp"
#include "harness/plan/program.hpp"

namespace shardlab {

struct CaseExpect {
  std::optional<std::vector<std::string>> collectives;
  std::optional<std::uint64_t> max_bytes_per_device;
  std::optional<std::uint64_t> max_peak_memory_per_device;
  int collectives_line = 0, bytes_line = 0, memory_line = 0;
  std::string scaled;  // shardlab run --dtype: " (the file's limit for float32, scaled to bfloat16)"
};

struct CaseFile {
  std::string path;
  TensorProgram program;  // made (make_program): every tensor's dims known
  std::string mesh;
  std::string dtype = "float32";
  std::uint64_t seed = 0;
  std::map<std::string, std::string> shard;  // tensor -> spec text, as written
  std::map<std::string, int> shard_line;
  bool backward = false;
  int backward_line = 0;
  std::string plan = "search";  // or "article"
  bool plan_only = false;       // too big to run here: checked against its plan, no tensors built
  bool keep_gathered = false;   // the forward's gathered copies kept for the backward pass
  std::string uneven = "chunk";  // dims that do not divide: "chunk", "pad" (core/mesh.hpp's Uneven) or "none"
  bool auto_layouts = false;     // layouts = "auto": every op output takes the cheapest layout, not propagation's
  CaseExpect expect;
  // Input values from files (inputs_from, or run/check --inputs in its place): read when the case
  // is; each array named as a program input (or a backward case's upstream gradient dy) is used
  // for it, its shape checked against the dims (a dim the case leaves out is read from it).
  std::string inputs_from;  // as resolved: relative to the case file's folder, or --inputs as given
  NamedArrays input_files;
  // Why a check above its power floor (WEAK, verify.hpp) is accepted; empty: a WEAK check fails.
  std::string allow_weak;
  // [measured]: a source's measured share of time spent communicating, by op part ("layer": all),
  // printed beside the modeled one (shardlab run --preset).
  std::string measured_source;
  std::map<std::string, double> measured_share;
};

// Error(io) when the file cannot be read; Error(parse) "PATH:LINE: ..." when it is not a case.
// `inputs`: a .npz or folder of NAME.npy to read the inputs from, in place of the file's
// inputs_from (Error(io) when it cannot be read, Error(rank_mismatch) when an array's shape
// disagrees with the case's dims or another array's).
CaseFile read_case_file(const std::string& path, const std::string& inputs = "");
// The same from text; `path` names it in messages.
CaseFile parse_case_file(const std::string& text, const std::string& path, const std::string& inputs = "");

}  // namespace shardlab
