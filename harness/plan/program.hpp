// A program: ops over tensors whose dims are named by one letter each.
// A user writes the inputs with their dims and the ops in order; every other tensor's dims are
// derived here, and every error names the op (its number and output), the tensor and the dim.
//
//   einsum   out = einsum(eq, a, b)        two operands; their dims must be eq's letters in order
//   unary    relu gelu exp tanh neg square rsqrt          out has the input's dims
//            copy: the input unchanged, laid out as out's spec says (a reshard a user can name)
//            scale value=0.5: x * value;  shift value=1e-5: x + value
//            stop_gradient: the input unchanged, and no gradient flows back through it (a
//            softmax's subtracted max, which changes no output)
//            roll over="s" value=4: the input moved 4 places along s, wrapping (core/roll.hpp);
//            where s is split, by whole blocks: a collective_permute of the blocks (ring attention's
//            shift of keys and values)
//   rename   to="btm"                      the input's data under new letters, dim by dim (keys
//                                          from the same x as queries need their own sequence dim)
//   binary   add sub mul div               broadcast by dim name: one operand's dims are a subset
//                                          of the other's, whose dims (and order) out takes
//   reduce   sum max mean over="h"         out drops the dims named in `over`
//   softmax  over="h"                      one dim; out has the input's dims
//   broadcast to="bsh"                     the input repeated along the dims it lacks (its dims a
//                                          subset of `to`, in to's order), times `scale`
//   split    over="j" value=1              part 1 of the input's dim j: out drops j (Megatron's
//                                          fused QKV: qkv[bsnjd] with j = 3, q = part 0, k = 1,
//                                          v = 2); j must be whole where it runs
//   concat   over="j" to="bsnjd"           its operands (as many as j is long, each with to's
//                                          dims but j) stacked along j: split's gradient
//   and what gradient programs (harness/plan/gradient.hpp) add: unary relu_grad gelu_grad
//   tanh_grad square_grad rsqrt_grad (each op's derivative), binary eq (1 where equal, else 0),
//   binary is_max(x, m) with m = max(x) over the dims m lacks: 1 where x reaches its row's max
//   (ties all 1), else 0; computed where x lies, against the complete m
//
// A program is checked whole when it is made (make_program): sizes for every letter, names that
// exist before they are used, no tensor defined twice, outputs that exist.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/einsum.hpp"
#include "core/tensor.hpp"

namespace shardlab {

enum class OpKind { einsum, unary, binary, reduce, softmax, broadcast, rename, split, concat };

struct ProgramOp {
  std::string out;              // the tensor it defines
  std::string name;             // "einsum", "gelu", "add", "sum", "softmax", ...
  OpKind kind = OpKind::unary;
  std::vector<std::string> in;  // its operands
  std::string eq;               // einsum only: "bsm,mh->bsh"
  std::string over;             // reduce, softmax, roll, split, concat: the dim letters
  std::string to;               // broadcast, rename, concat: the output's dims
  double scale = 1;             // broadcast only: multiplies every element (a mean's 1/n)
  double value = 0;             // scale (x * value), shift (x + value), roll, split (the part)
  bool has_value = false;
  std::string part;             // a name for costs summed by part ("attention"); backward ops
                                // take their forward op's
  int from_op = -1;             // a backward op: the forward op whose gradient rule made it
  int grad_operand = -1;        // a gradient einsum: which operand is the forward output's dz
  int line = 0;                 // where a case file wrote it (0: not from a file)
};

struct TensorProgram {
  std::string name;
  DimSizes sizes;                                         // every dim letter used
  std::vector<std::pair<std::string, std::string>> inputs;  // name, dims ("bsm"), in order
  std::vector<ProgramOp> ops;
  std::vector<std::string> outputs;
  std::map<std::string, std::string> dims;  // every tensor's dims, inputs and derived

  Shape shape(const std::string& tensor) const;  // from dims and sizes
  bool is_input(const std::string& tensor) const;
  // Every tensor in order of definition: inputs, then op outputs.
  std::vector<std::string> tensors() const;
};

// Known op names and their kind; false for a name that is none of them.
bool op_kind_of(const std::string& name, OpKind& kind);
// "relu, gelu, ..." for messages.
std::string op_names();
// An op written in code, as a case file's line would give it: out = name(in...), its kind from
// op_kind_of; `eq` for an einsum. Error(unsupported) for a name that is no op.
ProgramOp make_op(const std::string& out, const std::string& name, std::vector<std::string> in,
                  const std::string& eq = "");

// Derives every tensor's dims and checks the program; Error(parse) with a sentence naming the op
// ("op 2 (g = gelu)"), the tensor and the dim for anything wrong.
TensorProgram make_program(TensorProgram p);

// "op 2 (g = gelu)" / "op 1 (h = einsum bsm,mh->bsh, line 12)", numbered from 1; the line when a
// case file gave one.
std::string op_label(const TensorProgram& p, std::size_t i);

// The program as lines for people: "h = einsum(x, W_in)  bsm,mh->bsh  -> h[b, s, h]".
std::string program_text(const TensorProgram& p);

}  // namespace shardlab
