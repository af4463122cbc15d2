#include "harness/check/program_check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <xtensor/xstrided_view.hpp>

#include "core/einsum.hpp"
#include "core/error.hpp"
#include "core/ops.hpp"
#include "core/roll.hpp"
#include "core/split.hpp"
#include "harness/check/verify.hpp"

namespace shardlab {

namespace {

Tensor abs_of(const Tensor& t) { return xt::abs(t); }

// t's elements whose index along `axis` lies in [lo, hi).
Tensor slice_of(const Tensor& t, std::size_t axis, std::size_t lo, std::size_t hi) {
  xt::xstrided_slice_vector sv(t.dimension(), xt::all());
  sv[axis] = xt::range(lo, hi);
  return xt::strided_view(t, sv);
}

// A sum over one dim of length n in order.chunks blocks: block(lo, hi) gives the sum over [lo, hi)
// of it; the blocks are added as partial sums are (sum_rounded, core/tensor.hpp).
template <class Block>
Tensor chunked(std::size_t n, SumOrder order, DType t, const Block& block) {
  const std::size_t chunks = std::min<std::size_t>(n, static_cast<std::size_t>(std::max(1, order.chunks)));
  return sum_rounded(chunks, order.reverse, t, [&](std::size_t k) { return block(n * k / chunks, n * (k + 1) / chunks); });
}

// The longest of the letters summed over: the one to cut into blocks (a letter of size 1 would
// leave the sum as it was).
char longest(const TensorProgram& p, const std::string& letters) {
  char best = letters[0];
  for (char c : letters)
    if (p.sizes.at(c) > p.sizes.at(best)) best = c;
  return best;
}

}  // namespace

Tensor op_value(const TensorProgram& p, const ProgramOp& op, const std::map<std::string, Tensor>& values, DType dtype,
                SumOrder order) {
  const std::string& out_dims = p.dims.at(op.out);
  const Tensor& a = values.at(op.in[0]);
  switch (op.kind) {
    case OpKind::einsum: {
      const Einsum eq = Einsum::parse(op.eq);
      const Tensor& b = values.at(op.in[1]);
      const std::string over = eq.contracted();
      if (order.chunks <= 1 || over.empty()) return contract(eq, a, b, dtype);
      // Each block contracts only its slice of the summed letter on both sides (at 1/chunks of the
      // work): another valid order of the same terms, each block rounded as a device's part is.
      const char letter = longest(p, over);
      const std::size_t ax = eq.a.find(letter), bx = eq.b.find(letter);
      return chunked(shape_of(a)[ax], order, dtype, [&](std::size_t lo, std::size_t hi) {
        return contract(eq, slice_of(a, ax, lo, hi), slice_of(b, bx, lo, hi), dtype);
      });
    }
    case OpKind::unary:
      if (op.name == "roll") return roll_op(a, p.dims.at(op.in[0]).find(op.over[0]), long(op.value));
      return rounded(unary_op(op.name, a, op.value), dtype);
    case OpKind::binary: {
      const Shape shape = p.shape(op.out);
      const Tensor x = broadcast_to(a, p.dims.at(op.in[0]), out_dims, shape);
      const Tensor y = broadcast_to(values.at(op.in[1]), p.dims.at(op.in[1]), out_dims, shape);
      return rounded(binary_op(op.name, x, out_dims, y, out_dims, out_dims), dtype);
    }
    case OpKind::rename:
      return a;
    case OpKind::split:  // moves elements, rounds nothing
      return split_op(a, p.dims.at(op.in[0]).find(op.over[0]), static_cast<std::size_t>(op.value));
    case OpKind::concat: {
      std::vector<Tensor> parts;
      for (const auto& t : op.in) parts.push_back(values.at(t));
      return concat_op(parts, out_dims.find(op.over[0]));
    }
    case OpKind::broadcast:
      return rounded(broadcast_to(a, p.dims.at(op.in[0]), out_dims, p.shape(op.out)) * op.scale, dtype);
    case OpKind::reduce: {
      const std::string& in_dims = p.dims.at(op.in[0]);
      if (op.name == "max" || order.chunks <= 1) return rounded(reduce_op(op.name, a, in_dims, op.over), dtype);
      const std::size_t axis = in_dims.find(longest(p, op.over));
      const Tensor s = chunked(shape_of(a)[axis], order, dtype, [&](std::size_t lo, std::size_t hi) {
        return reduce_op("sum", slice_of(a, axis, lo, hi), in_dims, op.over);
      });
      if (op.name == "sum") return s;
      double n = 1;
      for (char c : op.over) n *= double(p.sizes.at(c));
      return rounded(s / n, dtype);
    }
    case OpKind::softmax:
      return rounded(softmax_op(a, out_dims, op.over[0]), dtype);
  }
  throw Error(ErrorKind::unsupported, "op_value: an op of unknown kind");
}

std::map<std::string, Tensor> program_inputs(const TensorProgram& p, std::uint64_t seed) {
  std::map<std::string, Tensor> out;
  std::uint64_t k = 0;
  for (const auto& kv : p.inputs) out[kv.first] = random_integers(p.shape(kv.first), seed * 1000 + k++, -64, 64) / 64.0;
  return out;
}

namespace {

// Each run's rounding of an elementwise result flushes a value below the smallest normal L to zero
// (core/dtype.hpp): off by at most L, not u times the value. The runs can differ by it only where
// their inputs may differ (move > 0: the same function of the same values flushes alike) and
// either value may lie below L: |V| < L + move, `move` how far the other run's value can be.
Tensor flush_bound(const Tensor& v, const Tensor& move, double smallest) {
  return xt::where(move > 0 && xt::abs(v) < smallest + move, 2 * smallest, 0.0);
}

// Where a bound is already positive (something is nonzero or may move), `extra` more; where it is
// 0 every term is exactly 0 in both runs, and nothing can be flushed.
Tensor plus_where_positive(const Tensor& e, double extra) { return e + xt::where(e > 0, extra, 0.0); }

}  // namespace

namespace {

// An einsum's bound: its own rounding (the run's over `group` devices and the reference's) and how
// far its operands' bounds can move it. `parts` (when given) gets the product's magnitudes.
Tensor einsum_bound(const TensorProgram& p, const ProgramOp& op, const ProgramReference& r, const Tensor& v,
                    int group, DType dtype, std::map<std::string, Tensor>* parts) {
  const Einsum eq = Einsum::parse(op.eq);
  const Tensor& a = r.values.at(op.in[0]);
  const Tensor& ea = r.bounds.at(op.in[0]);
  const Tensor& b = r.values.at(op.in[1]);
  const Tensor& eb = r.bounds.at(op.in[1]);
  std::size_t terms = 1;
  for (char c : eq.contracted()) terms *= p.sizes.at(c);
  const GemmRounding g = gemm_rounding(dtype, terms, static_cast<std::size_t>(group));
  const GemmRounding one = gemm_rounding(dtype, terms, 1);
  const Tensor aa = abs_of(a), ab = abs_of(b);
  Tensor magnitude = contract(eq, aa, ab, DType::float64);
  Tensor e = (g.product + one.product) * magnitude + (g.result + one.result) * abs_of(v);
  // |A| E_B + E_A |B| + E_A E_B = |A| E_B + E_A (|B| + E_B): two contractions, each left out
  // where its bound is zero (an input's).
  const bool a_moves = ea.size() && xt::amax(ea)() > 0, b_moves = eb.size() && xt::amax(eb)() > 0;
  if (b_moves) e = e + contract(eq, aa, eb, DType::float64);
  if (a_moves) e = e + contract(eq, ea, b_moves ? Tensor(ab + eb) : ab, DType::float64);
  e = plus_where_positive(e, g.absolute + one.absolute);  // products and partial sums flushed
  if (parts) (*parts)[op.out] = std::move(magnitude);
  return e;
}

// A binary op's bound: how far its operands' bounds can move it, then its own rounding.
Tensor binary_bound(const TensorProgram& p, const ProgramOp& op, const ProgramReference& r, const Tensor& v, double u,
                    double lam) {
  const std::string& out_dims = p.dims.at(op.out);
  const std::string& ad = p.dims.at(op.in[0]);
  const std::string& bd = p.dims.at(op.in[1]);
  const Shape shape = p.shape(op.out);
  const Tensor x = broadcast_to(r.values.at(op.in[0]), ad, out_dims, shape);
  const Tensor ex = broadcast_to(r.bounds.at(op.in[0]), ad, out_dims, shape);
  const Tensor y = broadcast_to(r.values.at(op.in[1]), bd, out_dims, shape);
  const Tensor ey = broadcast_to(r.bounds.at(op.in[1]), bd, out_dims, shape);
  const Tensor ax = abs_of(x), ay = abs_of(y);
  if (op.name == "is_max") {  // the operand is x, laid out as out; m = max(x) over the dims bd lacks
    std::string over;
    for (char c : out_dims)
      if (bd.find(c) == std::string::npos) over += c;
    return is_max_bound(x, ex, out_dims, over);
  }
  if (op.name == "eq")  // 0 or 1 in both runs; they can disagree only where the operands may meet
    return xt::where(xt::abs(x - y) <= ex + ey && ex + ey > 0, 1.0, 0.0);
  Tensor e;
  if (op.name == "add" || op.name == "sub")
    e = ex + ey;
  else if (op.name == "mul")
    e = ax * ey + ex * ay + ex * ey;
  else
    e = xt::where(ay > ey, (ex * ay + ax * ey) / (ay * (ay - ey)), std::numeric_limits<double>::infinity());
  return e + 2 * u * abs_of(v) + flush_bound(v, e, lam);
}

}  // namespace

ProgramReference run_reference(const TensorProgram& p, const std::map<std::string, Tensor>& inputs, DType dtype,
                               int devices, const std::vector<int>& groups, const std::vector<bool>& on_partials) {
  ProgramReference r;
  std::map<std::string, Tensor> parts;  // M: the parts' magnitudes, summed over devices (einsums, linear ops)
  const double u = unit_roundoff(dtype), lam = smallest_normal(dtype);
  for (const auto& kv : p.inputs) {
    r.values[kv.first] = rounded(inputs.at(kv.first), dtype);
    r.bounds[kv.first] = xt::zeros<double>(p.shape(kv.first));
  }
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const ProgramOp& op = p.ops[i];
    const int group = i < groups.size() ? groups[i] : devices;
    const std::string& out_dims = p.dims.at(op.out);
    const Tensor& a = r.values.at(op.in[0]);
    const Tensor& ea = r.bounds.at(op.in[0]);
    Tensor v = op_value(p, op, r.values, dtype), e;
    switch (op.kind) {
      case OpKind::einsum:
        e = einsum_bound(p, op, r, v, group, dtype, on_partials.empty() ? nullptr : &parts);
        break;
      case OpKind::unary:
        if (op.name == "roll")  // moves elements, rounds nothing
          e = roll_op(ea, p.dims.at(op.in[0]).find(op.over[0]), long(op.value));
        else {
          const Tensor move = unary_move_bound(op.name, a, ea, op.value);
          e = move + 2 * u * abs_of(v) + flush_bound(v, move, lam);
        }
        break;
      case OpKind::binary:
        e = binary_bound(p, op, r, v, u, lam);
        break;
      case OpKind::rename:
        e = ea;
        break;
      case OpKind::split:
        e = split_op(ea, p.dims.at(op.in[0]).find(op.over[0]), static_cast<std::size_t>(op.value));
        break;
      case OpKind::concat: {
        std::vector<Tensor> parts;
        for (const auto& t : op.in) parts.push_back(r.bounds.at(t));
        e = concat_op(parts, out_dims.find(op.over[0]));
        break;
      }
      case OpKind::broadcast: {
        const std::string& in_dims = p.dims.at(op.in[0]);
        const Tensor move = broadcast_to(ea, in_dims, out_dims, p.shape(op.out)) * std::abs(op.scale);
        e = move + 2 * u * abs_of(v) + flush_bound(v, move, lam);
        break;
      }
      case OpKind::reduce: {
        const std::string& in_dims = p.dims.at(op.in[0]);
        double n = 1;
        for (char c : op.over) n *= double(p.sizes.at(c));
        if (op.name == "max") {
          e = reduce_op("max", ea, in_dims, op.over);
        } else {
          e = reduce_op("sum", ea, in_dims, op.over) +
              2 * (n + group) * u * reduce_op("sum", abs_of(a), in_dims, op.over);
          e = plus_where_positive(e, 2 * (n + group) * lam);
          if (op.name == "mean") e = e / n;
        }
        break;
      }
      case OpKind::softmax: {
        const std::string o(1, op.over[0]);
        std::string kept;
        for (char c : out_dims)
          if (c != op.over[0]) kept += c;
        const Tensor d = broadcast_to(reduce_op("max", ea, out_dims, o), kept, out_dims, p.shape(op.out));
        const double n = double(p.sizes.at(op.over[0]));
        e = abs_of(v) * (xt::exp(2 * d) - 1) + 2 * (n + 3) * u * abs_of(v);
        // A value flushed in one run is below L there, so below L e^{2D} in the other.
        const Tensor reach = 2 * lam * xt::exp(2 * d);
        e = e + xt::where(abs_of(v) < reach, reach, 0.0);
        break;
      }
    }
    if (i < on_partials.size() && on_partials[i]) {
      // The parts' magnitudes: an add's are its operands' (spread to its dims), a scale's scaled.
      auto part = [&](const std::string& t) {
        const Tensor& m = parts.count(t) ? parts.at(t) : r.values.at(t);
        return broadcast_to(abs_of(m), p.dims.at(t), out_dims, p.shape(op.out));
      };
      Tensor m = op.kind == OpKind::rename ? abs_of(parts.count(op.in[0]) ? parts.at(op.in[0]) : a) : part(op.in[0]);
      if (op.in.size() > 1) m = m + part(op.in[1]);
      if (op.name == "scale") m = m * std::abs(op.value);
      e = e + double(group) * u * m + xt::where(m > 0, double(group) * lam, 0.0);
      parts[op.out] = m;
    }
    // inf * 0 in a bound (a divisor that may reach 0, times a zero) leaves NaN: the bound is unknown.
    r.bounds[op.out] = xt::where(xt::isnan(e), std::numeric_limits<double>::infinity(), e);
    r.values[op.out] = std::move(v);
  }
  return r;
}

ProgramReference checked_reference(const TensorProgram& p, const std::map<std::string, Tensor>& inputs, DType dtype,
                                   int devices, const std::vector<int>& groups, const std::vector<bool>& on_partials) {
  ProgramReference r = run_reference(p, inputs, dtype, devices, groups, on_partials);
  std::map<std::string, double> spread;  // the largest |R_order - R| over the tensor and the orders
  for (int k = 0; k < 3; ++k) {
    std::map<std::string, Tensor> values;
    for (const auto& kv : p.inputs) values[kv.first] = r.values.at(kv.first);
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      const int group = std::max(2, i < groups.size() ? groups[i] : devices);
      const SumOrder order{k == 2 ? 2 * group + 1 : group, k == 1};
      const ProgramOp& op = p.ops[i];
      values[op.out] = op_value(p, op, values, dtype, order);
      const double d = xt::amax(xt::abs(values[op.out] - r.values.at(op.out)))();
      double& s = spread[op.out];
      s = std::isnan(d) ? INFINITY : std::max(s, d);
    }
  }
  const double u = unit_roundoff(dtype), lam = smallest_normal(dtype);
  for (const auto& [name, s] : spread) {
    const Tensor& v = r.values.at(name);
    const double largest = v.size() ? double(xt::amax(xt::abs(v))()) : 0.0;
    if (!std::isfinite(s) || !std::isfinite(largest)) continue;
    Tensor& bound = r.bounds.at(name);
    bound = xt::minimum(bound, kOrderSpreadFactor * s + 2 * u * largest + (s > 0 || largest > 0 ? 2 * lam : 0.0));
  }
  return r;
}

ExpectedTensor contraction_expected(const Einsum& eq, const Tensor& a, const Tensor& b, DType dtype, int devices) {
  const DimSizes sizes = eq.sizes(shape_of(a), shape_of(b));
  double terms = 1;
  for (char c : eq.contracted()) terms *= double(sizes.at(c));
  auto integers = [](const Tensor& t) { return std::all_of(t.begin(), t.end(), [](double v) { return v == std::floor(v); }); };
  const double largest = a.size() && b.size() ? double(xt::amax(xt::abs(a))()) * double(xt::amax(xt::abs(b))()) : 0.0;
  if (integers(a) && integers(b) && terms * largest <= 1.0 / unit_roundoff(dtype)) {
    Tensor value = contract(eq, a, b, DType::float64);  // integers below 2^53: exact
    Tensor bound = xt::zeros<double>(shape_of(value));
    return {std::move(value), std::move(bound), true};
  }
  TensorProgram p;
  p.name = "contraction";
  p.sizes = sizes;
  p.inputs = {{"A", eq.a}, {"B", eq.b}};
  p.ops = {make_op("C", "einsum", {"A", "B"}, eq.text())};
  p.outputs = {"C"};
  p = make_program(std::move(p));
  ProgramReference r = checked_reference(p, {{"A", a}, {"B", b}}, dtype, devices, {devices});
  Tensor& bound = r.bounds.at("C");
  const bool exact = bound.size() == 0 || xt::amax(bound)() == 0;
  return {std::move(r.values.at("C")), std::move(bound), exact};
}

Verdict padding_check(const ProgramPlan& plan, const RunResult& run) {
  Verdict v;
  std::size_t ops = 0, devices = 0;
  for (std::size_t d = 0; d < run.outputs.size(); ++d) {
    const auto it = run.outputs[d].find(kPaddingDirty);
    if (it == run.outputs[d].end()) continue;
    ++devices;
    ops = it->second.size();
    for (std::size_t j = 0; j < it->second.size() && v.pass; ++j)
      if (it->second(j) != 0) {
        const ProgramOp& op = plan.program.ops[plan.ops.at(j).op];
        v.pass = false;
        v.detail = "device " + std::to_string(d) + ": " + op.out + " = " + op.name + "(...) holds a nonzero in its " +
                   "padding, which an einsum over the padded dim would add in";
      }
  }
  if (devices == 0) return v;
  v.name = kPaddingCheck;
  if (v.pass) v.detail = std::to_string(ops) + " ops on each of " + std::to_string(devices) + " devices";
  return v;
}

}  // namespace shardlab
