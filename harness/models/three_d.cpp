#include "harness/models/three_d.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "collectives/collectives.hpp"
#include "core/einsum.hpp"
#include "harness/check/program_check.hpp"
#include "harness/check/verify.hpp"
#include "core/error.hpp"
#include "core/ops.hpp"
#include "harness/models/adam_check.hpp"
#include "harness/models/training.hpp"

namespace shardlab {

std::string three_d_mesh(const ThreeDConfig& c) {
  return "D=" + std::to_string(c.data) + ",P=" + std::to_string(c.pipe) + ",T=" + std::to_string(c.tensor);
}

std::string traffic_axis(const LedgerRow& row) {
  if (row.op == "send" || row.op == "recv") return "P";
  return row.axes;
}

int zero_reduce_scatters(const ThreeDConfig& c) { return c.zero_stage == 2 ? c.chunks : 1; }

ThreeDCut three_d_cut(const ThreeDConfig& c, int d, int t) {
  const std::size_t T = static_cast<std::size_t>(c.tensor), D = static_cast<std::size_t>(c.data);
  const RowSlicing hidden(c.hidden, T, static_cast<std::size_t>(t), c.uneven);  // W2's rows (W1's columns) over T
  const std::size_t h0 = hidden.at[hidden.me], h1 = h0 + hidden.counts[hidden.me];
  const std::size_t me = static_cast<std::size_t>(d);
  return {h0, h1, hidden.stored, RowSlicing(c.width, D, me, c.uneven), RowSlicing(hidden.stored, D, me, c.uneven)};
}

Tensor three_d_shard(const ThreeDConfig& c, const Tensor& whole, int t, bool by_cols) {
  const std::size_t T = static_cast<std::size_t>(c.tensor), stored = three_d_cut(c, 0, t).hidden;
  return by_cols ? pad_cols(col_block(whole, t, T), stored) : pad_rows(row_block(whole, t, T), stored);
}

double zero_d_bytes(const ThreeDConfig& c, std::size_t element_bytes, int d, int t) {
  const ThreeDCut cut = three_d_cut(c, d, t);
  const double rs = zero_reduce_scatters(c);
  const double w1 = rs * cut.w1_rows.scatter_bytes(cut.hidden * element_bytes) + cut.w1_rows.gather_bytes(cut.hidden * element_bytes);
  const double w2 = rs * cut.w2_rows.scatter_bytes(c.width * element_bytes) + cut.w2_rows.gather_bytes(c.width * element_bytes);
  return w1 + w2;
}

namespace {
// Adam's first step from zero state.
void adam_first_step(Tensor& w, const Tensor& g, const ThreeDConfig& c) {
  Adam state(shape_of(w));
  state.step(w, g, 1, c.adam);
}
}  // namespace

ThreeDInputs three_d_inputs(const ThreeDConfig& c) {
  const std::size_t D = c.data, T = c.tensor;
  if (c.zero_stage != 1 && c.zero_stage != 2)
    throw Error(ErrorKind::parse, "3D parallelism here runs ZeRO stage 1 or 2, not " + std::to_string(c.zero_stage));
  if (c.uneven == Uneven::none && (c.hidden % T != 0 || (c.hidden / T) % D != 0 || c.width % D != 0))
    throw Error(ErrorKind::not_divisible, "hidden " + std::to_string(c.hidden) + " and width " + std::to_string(c.width) +
                                              " must split over T=" + std::to_string(T) + " and then D=" + std::to_string(D) +
                                              " under --uneven none; use --uneven chunk or pad");
  ThreeDInputs in;
  for (int p = 0; p < c.pipe; ++p) {
    in.w1.push_back(random_integers(Shape{c.width, c.hidden}, c.seed + 10 + 2 * p, -24, 24) / 64.0);
    in.w2.push_back(random_integers(Shape{c.hidden, c.width}, c.seed + 11 + 2 * p, -16, 16) / 64.0);
  }
  for (int k = 0; k < c.data * c.chunks; ++k) {
    in.x.push_back(random_integers(Shape{c.micro_batch, c.width}, c.seed + 100 + 2 * k, -64, 64) / 64.0);
    in.r.push_back(random_integers(Shape{c.micro_batch, c.width}, c.seed + 101 + 2 * k, -64, 64) / 64.0);
  }
  return in;
}

ThreeDReference three_d_reference(const ThreeDConfig& c, const ThreeDInputs& in, DType wire) {
  const double u = unit_roundoff(wire);
  Tensor x = in.x[0], r = in.r[0];
  for (std::size_t k = 1; k < in.x.size(); ++k) {
    x = xt::concatenate(xt::xtuple(x, in.x[k]), 0);
    r = xt::concatenate(xt::xtuple(r, in.r[k]), 0);
  }
  std::vector<Tensor> inputs = {x}, acts;  // each stage's input, and its hidden activation
  for (int p = 0; p < c.pipe; ++p) {
    acts.push_back(xt::tanh(Tensor(matmul(inputs.back(), in.w1[p]))));
    inputs.push_back(matmul(acts.back(), in.w2[p]));
  }
  ThreeDReference ref;
  // The output, and how far rounding (in the products, the sums over T and on the wire) may move
  // it: each stage adds bound |input| |W1| through tanh (slope at most 1) and bound |a| |W2|, and
  // carries the error it received through |W1| and |W2|.
  const double bound = 32.0 * (c.pipe + 1) * u;
  ref.y = inputs.back();
  ref.y_tol = xt::zeros<double>(x.shape());
  for (int p = 0; p < c.pipe; ++p) {
    const Tensor e_act = matmul(ref.y_tol, xt::abs(in.w1[p])) + bound * matmul(xt::abs(inputs[p]), xt::abs(in.w1[p]));
    ref.y_tol = matmul(e_act, xt::abs(in.w2[p])) + bound * matmul(xt::abs(acts[p]), xt::abs(in.w2[p]));
  }
  // The forward pass as the devices sum it: each stage's output the sum over T of the column
  // blocks' partial products, each rounded to the wire type and added in it (first block first, or
  // last first), the result in the wire type as the next stage receives it. What that moves y by,
  // kOrderSpreadFactor (program_check.hpp) times, with y's own last rounding, tightens the worst case.
  {
    const std::size_t T = static_cast<std::size_t>(c.tensor);
    double most = 0;
    for (bool last_first : {false, true}) {
      Tensor in_p = x;
      for (int p = 0; p < c.pipe; ++p) {
        const Tensor a = xt::tanh(Tensor(matmul(in_p, in.w1[p])));
        in_p = sum_rounded(T, last_first, wire, [&](std::size_t t) -> Tensor {
          return matmul(col_block(a, t, T), row_block(in.w2[p], t, T));
        });
      }
      most = std::max(most, double(xt::amax(xt::abs(in_p - ref.y))()));
    }
    if (std::isfinite(most)) ref.y_tol = xt::minimum(ref.y_tol, kOrderSpreadFactor * most + 2 * u * xt::abs(ref.y));
  }
  ref.w1 = in.w1;
  ref.w2 = in.w2;
  ref.g1.resize(c.pipe);
  ref.g2.resize(c.pipe);
  ref.g1_tol.resize(c.pipe);
  ref.g2_tol.resize(c.pipe);
  ref.w1_tol.resize(c.pipe);
  ref.w2_tol.resize(c.pipe);
  // How far the data shards' gradients, each rounded to the wire type and added in it (first shard
  // first, or last first: the ReduceScatter over D sums in some such order), move from one product
  // over the batch: the largest difference over the tensor. The worst-case bounds above ignore
  // cancellation; this is what rounding does here (as harness/check/program_check.hpp measures).
  // ZeRO-2 sums over D micro-batch by micro-batch (rows d * m + k of the batch), then over them.
  auto moved = [&](const Tensor& act, const Tensor& dz, const Tensor& whole) {
    const std::size_t D = static_cast<std::size_t>(c.data), m = static_cast<std::size_t>(c.chunks);
    double most = 0;
    for (bool last_first : {false, true}) {
      Tensor sum;
      if (c.zero_stage == 2) {
        sum = xt::zeros<double>(whole.shape());
        for (std::size_t k = 0; k < m; ++k)
          sum += sum_rounded(D, last_first, wire, [&](std::size_t d) -> Tensor {
            return matmul(transposed(row_block(act, d * m + k, D * m)), row_block(dz, d * m + k, D * m));
          });
      } else {
        sum = sum_rounded(D, last_first, wire, [&](std::size_t d) -> Tensor {
          return matmul(transposed(row_block(act, d, D)), row_block(dz, d, D));
        });
      }
      most = std::max(most, double(xt::amax(xt::abs(sum - whole))()));
    }
    return most;
  };
  std::vector<double> moved1(c.pipe), moved2(c.pipe);
  Tensor dz = r, dz_size = xt::abs(r);
  for (int p = c.pipe - 1; p >= 0; --p) {
    const Tensor& a = acts[p];
    ref.g2[p] = matmul(transposed(a), dz);
    ref.g2_tol[p] = bound * matmul(transposed(xt::abs(a)), dz_size);
    moved2[p] = moved(a, dz, ref.g2[p]);
    const Tensor slope = 1.0 - a * a;
    const Tensor dpre = matmul(dz, transposed(in.w2[p])) * slope;
    const Tensor dpre_size = matmul(dz_size, transposed(xt::abs(in.w2[p]))) * xt::abs(slope);
    ref.g1[p] = matmul(transposed(inputs[p]), dpre);
    ref.g1_tol[p] = bound * matmul(transposed(xt::abs(inputs[p])), dpre_size);
    moved1[p] = moved(inputs[p], dpre, ref.g1[p]);
    dz = matmul(dpre, transposed(in.w1[p]));
    dz_size = matmul(dpre_size, transposed(xt::abs(in.w1[p])));
  }
  // A gradient's tolerance: min(worst case, kOrderSpreadFactor x what the orders moved it + its own
  // last rounding); everything the forward pass and the stage boundaries round is in the worst case only, so the
  // measured part is kept at least 8 u |g| (two more roundings on each side).
  auto tighten = [&](Tensor& gtol, const Tensor& g, double s) {
    if (std::isfinite(s)) gtol = xt::minimum(gtol, kOrderSpreadFactor * s + 8 * u * xt::abs(g));
  };
  for (int p = 0; p < c.pipe; ++p) {
    tighten(ref.g1_tol[p], ref.g1[p], moved1[p]);
    tighten(ref.g2_tol[p], ref.g2[p], moved2[p]);
  }
  // One Adam step; where a gradient element is within its rounding of 0, either sign may win.
  auto step = [&](Tensor& w, const Tensor& g, const Tensor& gtol, Tensor& wtol) {
    const Tensor rho = gtol / xt::maximum(xt::abs(g), 1e-300);
    wtol = 2 * (xt::abs(w) + c.adam.lr) * u + c.adam.lr * xt::minimum(2.0, 4 * rho);
    adam_first_step(w, g, c);
  };
  const std::size_t scalar = std::min<std::size_t>(4, ref.w1[0].size());
  std::vector<double> plain_w(ref.w1[0].begin(), ref.w1[0].begin() + static_cast<long>(scalar));
  std::vector<double> plain_m(scalar), plain_v(scalar);
  plain_adam(plain_w, plain_m, plain_v, ref.g1[0], 1, c.adam);
  for (int p = 0; p < c.pipe; ++p) {
    step(ref.w1[p], ref.g1[p], ref.g1_tol[p], ref.w1_tol[p]);
    step(ref.w2[p], ref.g2[p], ref.g2_tol[p], ref.w2_tol[p]);
  }
  ref.adam_scalar = adam_against_plain("W1", plain_w, ref.w1[0], 1);
  return ref;
}

SpmdProgram three_d_program(const ThreeDConfig& c, const ThreeDInputs& in) {
  return [c, &in](Device& dev) -> Outputs {
    const int d = dev.coord("D"), p = dev.coord("P"), t = dev.coord("T"), T = c.tensor, P = c.pipe;
    const std::string stage = "_s" + std::to_string(p);
    const ThreeDCut cut = three_d_cut(c, d, t);
    Tensor w1 = three_d_shard(c, in.w1[p], t, true), w2 = three_d_shard(c, in.w2[p], t, false);
    const bool zero2 = c.zero_stage == 2;
    // ZeRO-1 sums the whole shards' gradients here; ZeRO-2 only the owned rows (own_g1, own_g2).
    Tensor g1 = zero2 ? Tensor() : zeros_like(w1), g2 = zero2 ? Tensor() : zeros_like(w2);
    Tensor own_g1 = zeros_like(cut.w1_rows.own(w1)), own_g2 = zeros_like(cut.w2_rows.own(w2));
    const double grad_held = zero2 ? double(own_g1.size() + own_g2.size()) : double(w1.size() + w2.size());
    const Shape block{c.micro_batch, c.width};
    std::map<int, std::pair<Tensor, Tensor>> stash;  // micro-batch -> (stage input, hidden activation)
    Tensor out;  // the last stage: its micro-batches' outputs, one after another
    for (int k = 0; k < c.chunks; ++k) {  // GPipe: every forward ...
      const std::string tag = "_c" + std::to_string(k);
      const Tensor x = p == 0 ? in.x[d * c.chunks + k] : recv(dev, dev.id() - T, block, "act" + tag);
      const Tensor a = unary_op("tanh", matmul(x, w1));
      const Tensor y = all_reduce(dev, Tensor(matmul(a, w2)), {"T"}, "y" + stage);  // W2's rows: partial sums
      if (p < P - 1) send(dev, y, dev.id() + T, "act" + tag);
      else out = k == 0 ? y : Tensor(xt::concatenate(xt::xtuple(out, y), 0));
      stash[k] = {x, a};
    }
    for (int k = c.chunks - 1; k >= 0; --k) {  // ... then every backward, last first
      const std::string tag = "_c" + std::to_string(k);
      const Tensor dy = p == P - 1 ? in.r[d * c.chunks + k] : recv(dev, dev.id() + T, block, "grad" + tag);
      const auto& [x, a] = stash.at(k);
      const Tensor dpre = matmul(dy, transposed(w2)) * (1.0 - a * a);
      if (zero2) {  // this micro-batch's gradient, summed over D now: only the owned rows stay
        own_g2 += cut.w2_rows.scatter(dev, Tensor(matmul(transposed(a), dy)), {"D"}, "dW2" + stage + tag);
        own_g1 += cut.w1_rows.scatter(dev, Tensor(matmul(transposed(x), dpre)), {"D"}, "dW1" + stage + tag);
      } else {
        g2 += matmul(transposed(a), dy);
        g1 += matmul(transposed(x), dpre);
      }
      if (p > 0) {  // the first stage's input needs no gradient
        const Tensor dx = all_reduce(dev, Tensor(matmul(dpre, transposed(w1))), {"T"}, "dx" + stage);
        send(dev, dx, dev.id() - T, "grad" + tag);
      }
    }
    // ZeRO-1 over D: sum the gradient shards, step the owned rows, gather the rows back (ZeRO-2
    // has summed them already).
    if (!zero2) {
      own_g1 = cut.w1_rows.scatter(dev, g1, {"D"}, "dW1" + stage);
      own_g2 = cut.w2_rows.scatter(dev, g2, {"D"}, "dW2" + stage);
    }
    Tensor own_w1 = cut.w1_rows.own(w1), own_w2 = cut.w2_rows.own(w2);
    if (!dev.strike(FaultKind::skip_update)) adam_first_step(own_w1, own_g1, c);  // --inject skip-update
    adam_first_step(own_w2, own_g2, c);
    w1 = cut.w1_rows.gather(dev, own_w1, {"D"}, "W1" + stage);
    w2 = cut.w2_rows.gather(dev, own_w2, {"D"}, "W2" + stage);
    Outputs result = {{"W1", w1}, {"W2", w2}, {"dW1", own_g1}, {"dW2", own_g2}, {"grad_held", Tensor{grad_held}}};
    if (p == P - 1) result["y"] = out;
    return result;
  };
}

std::vector<Verdict> three_d_check(const Mesh& mesh, const ThreeDConfig& c, const RunResult& run, const ThreeDReference& ref,
                                const std::string& tag) {
  Verdict outputs, grads, weights;
  // The loss weights the output linearly (L = sum y R), so no gradient depends on y: it is
  // checked on its own, or a wrong forward sum would pass unseen.
  outputs.name = tag + "last stage's output y = unsharded";
  grads.name = tag + "owned step-1 gradient rows = whole batch's";
  weights.name = tag + "W1, W2 shards after one Adam step = unsharded";
  for (int id = 0; id < mesh.devices(); ++id) {
    const auto k = mesh.coords(id);
    const int d = k[0], p = k[1], t = k[2];
    // Each as the device stores it: padding (--uneven pad) is expected to be exactly 0.
    const ThreeDCut cut = three_d_cut(c, d, t);
    auto shard = [&](const Tensor& w, bool by_cols) { return three_d_shard(c, w, t, by_cols); };
    auto own1 = [&](const Tensor& w) { return cut.w1_rows.own(shard(w, true)); };
    auto own2 = [&](const Tensor& w) { return cut.w2_rows.own(shard(w, false)); };
    const Outputs& o = run.outputs[id];
    const std::vector<std::pair<Verdict, Verdict*>> vs = {
        {compare("dW1", o.at("dW1"), own1(ref.g1[p]), own1(ref.g1_tol[p])), &grads},
        {compare("dW2", o.at("dW2"), own2(ref.g2[p]), own2(ref.g2_tol[p])), &grads},
        {compare("W1", o.at("W1"), shard(ref.w1[p], true), shard(ref.w1_tol[p], true)), &weights},
        {compare("W2", o.at("W2"), shard(ref.w2[p], false), shard(ref.w2_tol[p], false)), &weights}};
    for (const auto& [v, into] : vs) absorb(*into, v, "device " + std::to_string(id) + " " + v.name);
    if (p == c.pipe - 1) {
      const std::size_t n = ref.y.shape()[0] / c.data;
      auto mine = [&](const Tensor& whole) -> Tensor { return xt::view(whole, xt::range(d * n, (d + 1) * n), xt::all()); };
      absorb(outputs, compare("y", o.at("y"), mine(ref.y), mine(ref.y_tol)), "device " + std::to_string(id) + " y");
    }
  }
  return {outputs, grads, weights};
}

}  // namespace shardlab
