// Backward by rule: the gradient program of L = sum over outputs y of sum(y * R_y),
// derived mechanically from a program's ops (harness/plan/program.hpp). The result is one program,
// the forward ops followed by the backward ones, so it is propagated, planned, run and verified
// exactly as a forward program is; nothing about a model is written by hand.
//
// Each output y gets a new input dy (= R_y, seeded like every input). Walking the ops backwards,
// the gradient dz of each op's output z is complete (every op that reads z comes later and has
// been walked), and each operand a gets a contribution:
//   einsum   z = einsum(A,B->Z; a, b)  da = einsum(Z,B->A; dz, b)   db = einsum(A,Z->B; a, dz)
//   unary    z = f(a)                  da = dz * f_grad(a)  (relu_grad, gelu_grad, tanh_grad,
//                                      square_grad, rsqrt_grad); exp: dz * z; neg: -dz;
//                                      copy: copy(dz), so da lies as a does; scale: dz * value;
//                                      shift: dz
//   binary   z = a op b, dims Z        add: dz  sub: dz, -dz  mul: dz * b, dz * a
//                                      div: dz / b, -(dz * (z / b)); an operand broadcast into Z
//                                      gets the sum over the dims it lacks
//   sum      z = sum(a over O)         da = broadcast(dz to A); mean: times 1/|O|
//   max      z = max(a over O)         da = dz * is_max(a, z) / sum(is_max(a, z) over O): ties
//                                      share
//   softmax  z = softmax(a over d)     da = z * (dz - sum(dz * z over d))
//   broadcast z = broadcast(a to Z)    da = scale * sum(dz over Z's new dims)
//   rename   z = rename(a to Z)        da = rename(dz to A)
//   roll     z = roll(a over s, k)     da = roll(dz over s, -k)
//   split    z = split(a over j, k)    da = concat(dz_0, ..., dz_n-1 over j): every split of a
//                                      along j gives one part; a part no op used is zeros
//                                      (scale value=0 of another part); one op per part, so
//                                      Error(unsupported) past 256 parts in all, before any op
//   concat   z = concat(a_0.. over j)  da_k = split(dz over j, k)
// stop_gradient passes nothing back. A tensor read by several ops adds its contributions. Names: the gradient of t is dt (d_t, ...
// when that name is taken), partial contributions dt_1, dt_2, and each helper names what it holds
// (gelu_grad_h, is_max_x).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/mesh.hpp"
#include "harness/plan/program.hpp"
#include "harness/plan/propagate.hpp"

namespace shardlab {

struct GradientProgram {
  TensorProgram program;    // the forward ops, then the backward ops (made: every dim known)
  std::size_t forward_ops = 0;
  std::vector<std::pair<std::string, std::string>> seeds;  // output y -> the input dy holding R_y
  std::vector<std::pair<std::string, std::string>> grads;  // each forward input -> its gradient
  std::map<std::string, std::string> gradient_of;          // tensor holding a whole gradient -> of what
};

// The forward program's outputs, then the gradient of every input, are the program's outputs.
// Error(unsupported) naming the op for what the rules cannot differentiate (eq, is_max and the
// *_grad ops), and naming an input that no output depends on (its gradient is zero).
GradientProgram gradient_program(const TensorProgram& forward);

// Specs for the gradient program: forward tensors keep `forward`'s, each gradient lies as its
// tensor does (dW_in like W_in), and the helpers propagate from them, then take the layouts that
// make the backward send the fewest bytes (propagate.hpp's rule 7).
Propagation gradient_propagation(const GradientProgram& g, const Mesh& mesh, const Propagation& forward);

}  // namespace shardlab
