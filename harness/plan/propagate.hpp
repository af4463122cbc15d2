// Propagation (GSPMD's idea, article 002): the user annotates a few tensors and every other
// tensor of the program gets a spec, with where it came from. The rules, in priority order:
//
//  1. annotated: the spec the user gave (checked against the mesh and the tensor's shape).
//  2. like an annotated tensor: a tensor with exactly the dims of an annotated one takes its spec
//     (a layer's output keeps its input's layout, as the residual add after it will want).
//  3. forward, op by op: an einsum's output dim takes the axes its letter has in the first operand
//     that has it (then the second); elementwise ops keep their input's spec; a binary op takes
//     the spec of the operand with all of the output's dims (the other fills dims it lacks); a
//     reduction drops the reduced dims (a sum over a split dim leaves partial sums that the plan
//     completes); softmax keeps its input's spec.
//  4. backward, for tensors rules 1-3 left open (an unannotated weight): each dim takes the axes
//     its letter has in the op that reads it (the other operand, then the output).
//  5. then forward again, and anything still open is replicated.
//  6. whatever rule gave a softmax's output its spec, the softmax dim is made whole (an annotation
//     that splits it is refused); so is the dim a concat stacks along. A split's output drops its
//     dim: rule 3 by letter gives it the input's axes on the other dims.
//  7. only on request: op outputs rules 3-5 gave a spec and the user marked "auto" (or all of
//     them, with auto_all) take the layouts that make the program send the fewest bytes
//     (harness/plan/layout_search.hpp), instead of propagation's. By default every tensor keeps
//     the layout propagation gives, as GSPMD and DTensor give it: the natural layout answers
//     "where does the result live?", the search answers "what is the least I could move?".
//     `fixed` specs stay as given (a gradient program's forward tensors and each gradient); a
//     gradient program frees its helpers (harness/plan/gradient.hpp).
// Each derived spec is made valid: a mesh axis already used by an earlier dim of the tensor, or one
// that does not divide the dim, is dropped (and the origin says so).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/mesh.hpp"
#include "core/spec.hpp"
#include "harness/plan/program.hpp"

namespace shardlab {

struct PropagatedSpec {
  Spec spec;
  std::string origin;  // "annotated", "like x (same dims bsm)", "from x through op 1 (h = einsum ...)" ...
  bool annotated = false;
  bool free = false;   // an op's output given its spec by rules 3-5: the layout search may change it
};

struct Propagation {
  std::map<std::string, PropagatedSpec> specs;  // every tensor of the program
  int annotated = 0;                            // how many the user gave
};

// `annotations`: tensor -> spec text. Error(parse) naming the tensor for a spec that does not
// parse, does not fit the mesh or the tensor (wrong rank, unknown axis, not divisible).
// `fixed`: specs decided elsewhere, kept with their origins and not counted as annotations (a
// gradient program's forward tensors, and each gradient lying as its tensor does).
// An annotation "auto" on an op output leaves it free for rule 7's search; `auto_all` frees every
// op output the rules gave a spec (a case file's layouts = "auto").
Propagation propagate(const TensorProgram& p, const Mesh& mesh, const std::map<std::string, std::string>& annotations,
                      const std::map<std::string, PropagatedSpec>& fixed = {}, bool auto_all = false);

// One aligned line per tensor, in program order: name, dims, spec in the book's notation, origin.
std::string propagation_text(const TensorProgram& p, const Propagation& prop);

}  // namespace shardlab
