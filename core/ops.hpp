// Local kernels of the program form (harness/plan/program.hpp) on float64 tensors whose dims are
// named by letters: what one device computes between collectives, and what the unsharded
// reference computes on whole tensors. The caller rounds results to its element type.
#pragma once
#include <string>

#include "core/tensor.hpp"

namespace shardlab {

// relu, gelu, exp, tanh, neg, square, rsqrt, copy and stop_gradient (the input unchanged), elementwise, and the derivatives the gradient program
// uses: relu_grad (1 where x > 0), gelu_grad, tanh_grad, square_grad (2x), rsqrt_grad (-x^-1.5 / 2).
// Error(unsupported) for another name.
// scale and shift take `value`: x * value, x + value.
Tensor unary_op(const std::string& name, const Tensor& x, double value = 0);
// The largest |f'| of unary `name` on [x - e, x + e], elementwise: how far an error e in x can
// move f(x) (infinite where rsqrt's interval reaches 0).
Tensor unary_slope_bound(const std::string& name, const Tensor& x, const Tensor& e, double value = 0);
// How far f(x) can move when x moves by at most e, elementwise: slope bound times e, and for
// relu_grad (a step) 1 where [x - e, x + e] reaches across 0. Zero where e is zero.
Tensor unary_move_bound(const std::string& name, const Tensor& x, const Tensor& e, double value = 0);

// add, sub, mul, div, eq and is_max (1 where equal, else 0) of a (dims a_dims) and b (b_dims), broadcast by dim letter into out_dims
// (the dims of whichever operand has them all).
Tensor binary_op(const std::string& name, const Tensor& a, const std::string& a_dims, const Tensor& b,
                 const std::string& b_dims, const std::string& out_dims);
// The operand `t` (dims t_dims) spread to out_dims (and out's shape) by repeating it along the
// dims it lacks.
Tensor broadcast_to(const Tensor& t, const std::string& t_dims, const std::string& out_dims, const Shape& out_shape);

// sum, max or mean of x (dims) over the letters in `over`; the result keeps the other dims in order.
// mean divides by `count` when it is given (the whole reduced size, when x is one device's block).
Tensor reduce_op(const std::string& name, const Tensor& x, const std::string& dims, const std::string& over,
                 double count = 0);
// How far is_max (x against its row's max over the letters in `over`) can differ between x and any x' with |x' - x| <= e: 0 where the order is
// certain (the element stays strictly above every other of its row, or strictly below one), or the
// row has no error at all; else 1.
Tensor is_max_bound(const Tensor& x, const Tensor& e, const std::string& dims, const std::string& over);
// softmax of x along dim letter `over`, the largest entry subtracted first.
Tensor softmax_op(const Tensor& x, const std::string& dims, char over);

}  // namespace shardlab
