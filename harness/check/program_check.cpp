#include "harness/check/program_check.hpp"

#include <cmath>
#include <limits>

#include "core/einsum.hpp"
#include "core/error.hpp"
#include "core/ops.hpp"
#include "harness/check/verify.hpp"

namespace shardlab {

namespace {

Tensor abs_of(const Tensor& t) { return xt::abs(t); }

}  // namespace

std::map<std::string, Tensor> program_inputs(const TensorProgram& p, std::uint64_t seed) {
  std::map<std::string, Tensor> out;
  std::uint64_t k = 0;
  for (const auto& kv : p.inputs) out[kv.first] = random_integers(p.shape(kv.first), seed * 1000 + k++, -64, 64) / 64.0;
  return out;
}

ProgramReference run_reference(const TensorProgram& p, const std::map<std::string, Tensor>& inputs, DType dtype,
                               int devices, const std::vector<int>& groups, const std::vector<bool>& on_partials) {
  ProgramReference r;
  std::map<std::string, Tensor> parts;  // M: the parts' magnitudes, summed over devices (einsums, linear ops)
  const double u = unit_roundoff(dtype);
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
    Tensor v, e;
    switch (op.kind) {
      case OpKind::einsum: {
        const Einsum eq = Einsum::parse(op.eq);
        const Tensor& b = r.values.at(op.in[1]);
        const Tensor& eb = r.bounds.at(op.in[1]);
        std::size_t terms = 1;
        for (char c : eq.contracted()) terms *= p.sizes.at(c);
        const GemmRounding g = gemm_rounding(dtype, terms, static_cast<std::size_t>(group));
        const GemmRounding one = gemm_rounding(dtype, terms, 1);
        v = contract(eq, a, b, dtype);
        const Tensor aa = abs_of(a), ab = abs_of(b);
        e = contract(eq, aa, eb, DType::float64) + contract(eq, ea, ab, DType::float64) +
            contract(eq, ea, eb, DType::float64) + (g.product + one.product) * contract(eq, aa, ab, DType::float64) +
            (g.result + one.result) * abs_of(v);
        parts[op.out] = contract(eq, aa, ab, DType::float64);
        break;
      }
      case OpKind::unary:
        v = rounded(unary_op(op.name, a, op.value), dtype);
        e = unary_move_bound(op.name, a, ea, op.value) + 2 * u * abs_of(v);
        break;
      case OpKind::binary: {
        const std::string& ad = p.dims.at(op.in[0]);
        const std::string& bd = p.dims.at(op.in[1]);
        const Shape shape = p.shape(op.out);
        const Tensor x = broadcast_to(a, ad, out_dims, shape), ex = broadcast_to(ea, ad, out_dims, shape);
        const Tensor y = broadcast_to(r.values.at(op.in[1]), bd, out_dims, shape);
        const Tensor ey = broadcast_to(r.bounds.at(op.in[1]), bd, out_dims, shape);
        v = rounded(binary_op(op.name, x, out_dims, y, out_dims, out_dims), dtype);
        const Tensor ax = abs_of(x), ay = abs_of(y);
        if (op.name == "is_max") {  // the operand is x, laid out as out; m = max(x) over the dims bd lacks
          std::string over;
          for (char c : out_dims)
            if (bd.find(c) == std::string::npos) over += c;
          e = is_max_bound(x, ex, out_dims, over);
          break;
        }
        if (op.name == "eq") {  // 0 or 1 in both runs; they can disagree only where the operands may meet
          e = xt::where(xt::abs(x - y) <= ex + ey && ex + ey > 0, 1.0, 0.0);
          break;
        }
        if (op.name == "add" || op.name == "sub")
          e = ex + ey;
        else if (op.name == "mul")
          e = ax * ey + ex * ay + ex * ey;
        else
          e = xt::where(ay > ey, (ex * ay + ax * ey) / (ay * (ay - ey)), std::numeric_limits<double>::infinity());
        e = e + 2 * u * abs_of(v);
        break;
      }
      case OpKind::rename:
        v = a;
        e = ea;
        break;
      case OpKind::broadcast: {
        const std::string& in_dims = p.dims.at(op.in[0]);
        v = rounded(broadcast_to(a, in_dims, out_dims, p.shape(op.out)) * op.scale, dtype);
        e = broadcast_to(ea, in_dims, out_dims, p.shape(op.out)) * std::abs(op.scale) + 2 * u * abs_of(v);
        break;
      }
      case OpKind::reduce: {
        const std::string& in_dims = p.dims.at(op.in[0]);
        double n = 1;
        for (char c : op.over) n *= double(p.sizes.at(c));
        v = rounded(reduce_op(op.name, a, in_dims, op.over), dtype);
        if (op.name == "max") {
          e = reduce_op("max", ea, in_dims, op.over);
        } else {
          e = reduce_op("sum", ea, in_dims, op.over) +
              2 * (n + group) * u * reduce_op("sum", abs_of(a), in_dims, op.over);
          if (op.name == "mean") e = e / n;
        }
        break;
      }
      case OpKind::softmax: {
        const std::string o(1, op.over[0]);
        std::string kept;
        for (char c : out_dims)
          if (c != op.over[0]) kept += c;
        v = rounded(softmax_op(a, out_dims, op.over[0]), dtype);
        const Tensor d = broadcast_to(reduce_op("max", ea, out_dims, o), kept, out_dims, p.shape(op.out));
        const double n = double(p.sizes.at(op.over[0]));
        e = abs_of(v) * (xt::exp(2 * d) - 1) + 2 * (n + 3) * u * abs_of(v);
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
      e = e + double(group) * u * m;
      parts[op.out] = m;
    }
    // inf * 0 in a bound (a divisor that may reach 0, times a zero) leaves NaN: the bound is unknown.
    r.bounds[op.out] = xt::where(xt::isnan(e), std::numeric_limits<double>::infinity(), e);
    r.values[op.out] = std::move(v);
  }
  return r;
}

}  // namespace shardlab
