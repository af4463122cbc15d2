#include "core/ops.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "core/gelu.hpp"
#include "core/trace.hpp"

namespace shardlab {

namespace {

std::vector<std::size_t> strides_of(const Shape& s) {
  std::vector<std::size_t> st(s.size(), 1);
  for (std::size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// For each element of a tensor of shape `out` (row-major), the flat index of the element of a
// tensor with dims `from` (a subset of out_dims' letters) it reads.
std::vector<std::size_t> gather_index(const std::string& from, const Shape& from_shape, const std::string& out_dims,
                                      const Shape& out) {
  const auto fs = strides_of(from_shape);
  std::vector<std::size_t> step(out.size(), 0);  // stride in `from` of each out dim (0: repeated)
  for (std::size_t d = 0; d < out_dims.size(); ++d) {
    const auto k = from.find(out_dims[d]);
    if (k != std::string::npos) step[d] = fs[k];
  }
  const std::size_t n = element_count(out);
  std::vector<std::size_t> idx(n, 0), coord(out.size(), 0);
  std::size_t at = 0;
  for (std::size_t i = 0; i < n; ++i) {
    idx[i] = at;
    for (std::size_t d = out.size(); d-- > 0;) {  // next row-major coordinate
      at += step[d];
      if (++coord[d] < out[d]) break;
      at -= step[d] * out[d];
      coord[d] = 0;
    }
  }
  return idx;
}

double slope(const std::string& name, double x, double e, double value) {
  const double lo = x - e, hi = x + e, big = std::max(std::abs(lo), std::abs(hi));
  if (name == "scale") return std::abs(value);
  if (name == "shift") return 1;
  if (name == "relu" || name == "neg" || name == "tanh" || name == "copy" || name == "stop_gradient") return 1;
  if (name == "gelu") return 1.13;  // |gelu'(x)| <= 1.129 everywhere (its maximum, near x = 2.42)
  if (name == "exp") return std::exp(hi);
  if (name == "square") return 2 * big;
  if (name == "rsqrt") return lo > 0 ? 0.5 * std::pow(lo, -1.5) : std::numeric_limits<double>::infinity();
  // The derivatives the gradient program uses; each bound is the largest |f''| of its op.
  if (name == "gelu_grad") return 0.8;     // |gelu''(x)| = phi(x) |2 - x^2| <= 2 phi(0) = 0.798
  if (name == "tanh_grad") return 0.77;    // |d/dx (1 - tanh^2)| = 2 |tanh| sech^2 <= 4 / (3 sqrt 3)
  if (name == "square_grad") return 2;
  if (name == "rsqrt_grad") return lo > 0 ? 0.75 * std::pow(lo, -2.5) : std::numeric_limits<double>::infinity();
  throw Error(ErrorKind::unsupported, "no unary op " + name);
}

}  // namespace

Tensor unary_op(const std::string& name, const Tensor& x, double value) {
  if (name == "gelu") return gelu(x);  // their own spans (core/gelu.cpp)
  if (name == "gelu_grad") return gelu_grad(x);
  TraceSpan span(name, [&] { return shape_text(shape_of(x)); });
  if (name == "scale") return x * value;
  if (name == "shift") return x + value;
  Tensor y = x;
  double* p = y.data();
  const std::size_t n = y.size();
  if (name == "relu")
    for (std::size_t i = 0; i < n; ++i) p[i] = p[i] > 0 ? p[i] : 0;
  else if (name == "exp")
    for (std::size_t i = 0; i < n; ++i) p[i] = std::exp(p[i]);
  else if (name == "tanh")
    for (std::size_t i = 0; i < n; ++i) p[i] = std::tanh(p[i]);
  else if (name == "copy" || name == "stop_gradient")
    ;
  else if (name == "neg")
    for (std::size_t i = 0; i < n; ++i) p[i] = -p[i];
  else if (name == "square")
    for (std::size_t i = 0; i < n; ++i) p[i] = p[i] * p[i];
  else if (name == "rsqrt")
    for (std::size_t i = 0; i < n; ++i) p[i] = 1 / std::sqrt(p[i]);
  else if (name == "relu_grad")
    for (std::size_t i = 0; i < n; ++i) p[i] = p[i] > 0 ? 1 : 0;
  else if (name == "tanh_grad")
    for (std::size_t i = 0; i < n; ++i) p[i] = 1 - std::tanh(p[i]) * std::tanh(p[i]);
  else if (name == "square_grad")
    for (std::size_t i = 0; i < n; ++i) p[i] = 2 * p[i];
  else if (name == "rsqrt_grad")
    for (std::size_t i = 0; i < n; ++i) p[i] = -0.5 / (p[i] * std::sqrt(p[i]));
  else
    throw Error(ErrorKind::unsupported, "no unary op " + name);
  return y;
}

Tensor unary_slope_bound(const std::string& name, const Tensor& x, const Tensor& e, double value) {
  Tensor s = x;
  for (std::size_t i = 0; i < s.size(); ++i) s.data()[i] = slope(name, x.data()[i], e.data()[i], value);
  return s;
}

Tensor unary_move_bound(const std::string& name, const Tensor& x, const Tensor& e, double value) {
  Tensor m = x;
  for (std::size_t i = 0; i < m.size(); ++i) {
    const double v = x.data()[i], err = e.data()[i];
    if (name == "relu_grad")  // a step: it moves by 1 where the interval reaches across 0, else not at all
      m.data()[i] = err > 0 && v - err <= 0 && v + err > 0 ? 1 : 0;
    else
      m.data()[i] = err > 0 ? slope(name, v, err, value) * err : 0;
  }
  return m;
}

Tensor broadcast_to(const Tensor& t, const std::string& t_dims, const std::string& out_dims, const Shape& out_shape) {
  const auto idx = gather_index(t_dims, shape_of(t), out_dims, out_shape);
  Tensor y = xt::empty<double>(out_shape);
  for (std::size_t i = 0; i < idx.size(); ++i) y.data()[i] = t.data()[idx[i]];
  return y;
}

Tensor binary_op(const std::string& name, const Tensor& a, const std::string& a_dims, const Tensor& b,
                 const std::string& b_dims, const std::string& out_dims) {
  TraceSpan span(name, [&] { return a_dims + "," + b_dims + "->" + out_dims + " " + shape_text(shape_of(a)); });
  const Shape out = a_dims == out_dims ? shape_of(a) : shape_of(b);
  const Tensor x = a_dims == out_dims ? a : broadcast_to(a, a_dims, out_dims, out);
  const Tensor y = b_dims == out_dims ? b : broadcast_to(b, b_dims, out_dims, out);
  if (name == "add") return x + y;
  if (name == "sub") return x - y;
  if (name == "mul") return x * y;
  if (name == "div") return x / y;
  if (name == "eq" || name == "is_max") return xt::where(xt::equal(x, y), 1.0, 0.0);
  throw Error(ErrorKind::unsupported, "no binary op " + name);
}

Tensor reduce_op(const std::string& name, const Tensor& x, const std::string& dims, const std::string& over,
                 double count) {
  TraceSpan span(name, [&] { return dims + " over " + over + " " + shape_text(shape_of(x)); });
  if (name != "sum" && name != "max" && name != "mean") throw Error(ErrorKind::unsupported, "no reduction " + name);
  const Shape in = shape_of(x);
  std::string kept;
  Shape out;
  double reduced = 1;
  for (std::size_t d = 0; d < dims.size(); ++d)
    if (over.find(dims[d]) == std::string::npos) {
      kept += dims[d];
      out.push_back(in[d]);
    } else {
      reduced *= double(in[d]);
    }
  // Each input element's output index: the input's coordinates on the kept dims.
  const auto os = strides_of(out);
  std::vector<std::size_t> step(in.size(), 0);
  for (std::size_t d = 0, k = 0; d < dims.size(); ++d)
    if (over.find(dims[d]) == std::string::npos) step[d] = os[k++];
  const double start = name == "max" ? -std::numeric_limits<double>::infinity() : 0.0;
  Tensor y = xt::empty<double>(out);
  std::fill(y.data(), y.data() + y.size(), start);
  std::vector<std::size_t> coord(in.size(), 0);
  std::size_t at = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    double& o = y.data()[at];
    o = name == "max" ? std::max(o, x.data()[i]) : o + x.data()[i];
    for (std::size_t d = in.size(); d-- > 0;) {
      at += step[d];
      if (++coord[d] < in[d]) break;
      at -= step[d] * in[d];
      coord[d] = 0;
    }
  }
  if (name == "mean") y /= count > 0 ? count : reduced;
  return y;
}

namespace {

std::string kept_dims(const std::string& dims, const std::string& over) {
  std::string kept;
  for (char c : dims)
    if (over.find(c) == std::string::npos) kept += c;
  return kept;
}

}  // namespace

Tensor is_max_bound(const Tensor& x, const Tensor& e, const std::string& dims, const std::string& over) {
  const std::string kept = kept_dims(dims, over);
  const Shape shape = shape_of(x);
  auto spread = [&](const Tensor& row) { return broadcast_to(row, kept, dims, shape); };
  const Tensor lo = x - e, hi = x + e;
  // Certainly 0: some other element's lowest value is above this one's highest.
  const Tensor floor = spread(reduce_op("max", lo, dims, over));
  // Certainly 1: above every other's highest. The largest `hi` of the row, and the second
  // largest, found as the largest of hi with the row's largest masked out (a tie keeps it).
  const Tensor top = spread(reduce_op("max", hi, dims, over));
  const Tensor is_top = xt::where(xt::equal(hi, top), 1.0, 0.0);
  const Tensor tops = spread(reduce_op("sum", is_top, dims, over));
  const double none = -std::numeric_limits<double>::infinity();
  const Tensor second = spread(reduce_op("max", xt::where(xt::equal(hi, top), none, hi), dims, over));
  const Tensor others_top = xt::where(xt::equal(hi, top) && xt::equal(tops, 1.0), second, top);
  const Tensor row_error = spread(reduce_op("max", e, dims, over));
  const auto certain = hi < floor || lo > others_top || xt::equal(row_error, 0.0);
  return xt::where(certain, 0.0, 1.0);
}

Tensor softmax_op(const Tensor& x, const std::string& dims, char over) {
  TraceSpan span("softmax", [&] { return dims + " over " + std::string(1, over) + " " + shape_text(shape_of(x)); });
  const std::string o(1, over);
  const Tensor m = reduce_op("max", x, dims, o);
  std::string kept;
  for (char c : dims)
    if (c != over) kept += c;
  const Tensor e = unary_op("exp", x - broadcast_to(m, kept, dims, shape_of(x)));
  const Tensor s = reduce_op("sum", e, dims, o);
  return e / broadcast_to(s, kept, dims, shape_of(x));
}

}  // namespace shardlab
