#include "harness/plan/uneven_steps.hpp"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "collectives/collectives.hpp"
#include "collectives/predict.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"

namespace shardlab {

namespace {

using Axes = std::vector<std::string>;

bool divides(const Mesh& mesh, const Spec& s, const Shape& global, int d) {
  return global[static_cast<std::size_t>(d)] % static_cast<std::size_t>(s.shards(mesh, static_cast<std::size_t>(d))) == 0;
}

// Real rows of `device`'s block of dim d, and where they start.
std::size_t rows(const Mesh& mesh, const Spec& s, const Shape& global, int d, int device) {
  const DimBlock b = dim_block(mesh, s, global, static_cast<std::size_t>(d), device);
  return b.stop - b.start;
}

std::size_t row_elements(const Shape& shape, std::size_t dim) {
  std::size_t r = 1;
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (i != dim) r *= shape[i];
  return r;
}

// Real rows of dim d of every member of the group of `device` over `axes`, in group order.
std::vector<std::size_t> member_rows(const Mesh& mesh, const Spec& s, const Shape& global, int d, int device,
                                     const Axes& axes) {
  std::vector<std::size_t> out;
  for (int m : mesh.group(device, axes)) out.push_back(rows(mesh, s, global, d, m));
  return out;
}

}  // namespace

bool step_is_uneven(const Mesh& mesh, StepKind kind, int dim, int to_dim, const Spec& before, const Spec& after,
                    const Shape& global) {
  if (mesh.uneven() == Uneven::none || dim < 0 || global.empty()) return false;
  if (kind == StepKind::contract || kind == StepKind::all_reduce || kind == StepKind::all_reduce_max) return false;
  for (int d : {dim, to_dim})
    if (d >= 0 && (!divides(mesh, before, global, d) || !divides(mesh, after, global, d))) return true;
  return false;
}

namespace {

std::size_t count_uneven_step_bytes(const Mesh& mesh, StepKind kind, const Axes& axes, int dim, int to_dim,
                                    const Spec& before, const Spec& after, const Shape& global, std::size_t eb) {
  // Every device's count for every step the planner weighs: 4.2 s for a plan on 32x32 here, past
  // 30 s on 64x64.
  constexpr int kMaxUnevenDevices = 1024;
  if (mesh.devices() > kMaxUnevenDevices)
    throw Error(ErrorKind::unsupported, "uneven blocks on " + std::to_string(mesh.devices()) + " devices are past the " +
                                            std::to_string(kMaxUnevenDevices) + " the planner weighs in seconds; " +
                                            "give a smaller mesh or dims that divide it");
  const std::string op = step_kind_name(kind);
  const bool pad = mesh.uneven() == Uneven::pad;
  std::size_t most = 0;
  // Group by group (each device once): the members' real rows are the same list for every member,
  // so they are found once per group, not once per device (on a 64x64 mesh that was 64 times the
  // work, and --plan-only ran past 30 s).
  std::vector<char> done(static_cast<std::size_t>(mesh.devices()), 0);
  for (int first = 0; first < mesh.devices(); ++first) {
    if (done[static_cast<std::size_t>(first)]) continue;
    const std::vector<int> group = mesh.group(first, axes);
    const int n = static_cast<int>(group.size());
    const int cut = kind == StepKind::all_to_all ? to_dim : dim;
    const Spec& by = kind == StepKind::all_gather ? before : after;
    std::vector<std::size_t> rows_of_members;
    if (!pad && kind != StepKind::all_reduce && kind != StepKind::all_reduce_max)
      rows_of_members = member_rows(mesh, by, global, cut, first, axes);
    for (int me = 0; me < n; ++me) {
      const int d = group[static_cast<std::size_t>(me)];
      done[static_cast<std::size_t>(d)] = 1;
      const Shape held = block_of(mesh, before, global, d).stored_shape();
      std::size_t sent = 0;
      if (kind == StepKind::all_reduce || kind == StepKind::all_reduce_max) {
        sent = predicted_bytes_sent(op, n, bytes_of(held, eb), eb);
      } else if (pad) {
        // The even collective on padded blocks; ReduceScatter and AllToAll first pad the dim they
        // cut to n blocks of the new layout's stored length.
        Shape in = held;
        if (kind == StepKind::reduce_scatter)
          in[static_cast<std::size_t>(dim)] = n * dim_block(mesh, after, global, static_cast<std::size_t>(dim), d).stored;
        if (kind == StepKind::all_to_all)
          in[static_cast<std::size_t>(to_dim)] = n * dim_block(mesh, after, global, static_cast<std::size_t>(to_dim), d).stored;
        sent = predicted_bytes_sent(op, n, bytes_of(in, eb), eb);
      } else {
        std::vector<std::size_t> parts = rows_of_members;
        for (auto& p : parts) p *= row_elements(held, static_cast<std::size_t>(cut)) * eb;
        sent = predicted_bytes_sent_v(op, parts, me);
      }
      most = std::max(most, sent);
    }
  }
  return most;
}

}  // namespace

std::size_t uneven_step_bytes(const Mesh& mesh, StepKind kind, const Axes& axes, int dim, int to_dim,
                              const Spec& before, const Spec& after, const Shape& global, std::size_t eb) {
  if (kind == StepKind::local_slice || kind == StepKind::contract) return 0;
  // The planner weighs the same step again and again (every search over a program's layouts
  // revisits it): a case with 12 heads on 8 devices spent 4 s of --plan-only here. Remembered per
  // thread by everything the count depends on.
  static thread_local std::unordered_map<std::string, std::size_t> known;
  std::string key = mesh.text() + (mesh.uneven() == Uneven::pad ? "|pad|" : "|chunk|") + step_kind_name(kind) + "|";
  for (const auto& a : axes) key += a + ",";
  key += "|" + std::to_string(dim) + "|" + std::to_string(to_dim) + "|" + before.text() + "|" + after.text() + "|" +
         std::to_string(eb) + "|";
  for (std::size_t g : global) key += std::to_string(g) + ",";
  const auto it = known.find(key);
  if (it != known.end()) return it->second;
  const std::size_t bytes = count_uneven_step_bytes(mesh, kind, axes, dim, to_dim, before, after, global, eb);
  if (known.size() > (std::size_t{1} << 16)) known.clear();
  known.emplace(std::move(key), bytes);
  return bytes;
}

template <class T>
xt::xarray<T> apply_uneven_step(Device& dev, const PlanStep& s, const xt::xarray<T>& x) {
  const Mesh& mesh = dev.mesh();
  const Shape& g = s.global;
  if (g.empty())
    throw Error(ErrorKind::unsupported, "step " + step_kind_name(s.kind) + " of " + s.tensor +
                                            " acts on uneven blocks but does not know the tensor's global shape");
  const int me = dev.id();
  const std::size_t d = static_cast<std::size_t>(s.dim);
  const bool pad = mesh.uneven() == Uneven::pad;
  const DType t = dtype_of<T>();
  const Shape in = shape_of(x);
  const Shape out_shape = block_of(mesh, s.after, g, me).stored_shape();
  const DimBlock was = dim_block(mesh, s.before, g, d, me), now = dim_block(mesh, s.after, g, d, me);
  switch (s.kind) {
    case StepKind::local_slice: {  // this device's rows of its own block: no messages
      xt::xarray<T> y = pad ? xt::zeros<T>(out_shape) : xt::empty<T>(out_shape);
      copy_rows(x.data(), in, now.start - was.start, now.stop - now.start, y.data(), out_shape, 0, d, t);
      return y;
    }
    case StepKind::all_gather: {
      const auto counts = member_rows(mesh, s.before, g, s.dim, me, s.axes);
      if (!pad) return all_gather_v(dev, x, s.axes, d, counts, s.tensor);
      // Padded blocks of was.stored rows each, back to back: keep each one's real rows.
      const xt::xarray<T> y = all_gather(dev, x, s.axes, d, s.tensor);
      xt::xarray<T> z = xt::zeros<T>(out_shape);
      std::size_t at = 0;
      for (std::size_t i = 0; i < counts.size(); ++i) {
        copy_rows(y.data(), shape_of(y), i * was.stored, counts[i], z.data(), out_shape, at, d, t);
        at += counts[i];
      }
      return z;
    }
    case StepKind::reduce_scatter: {
      const auto counts = member_rows(mesh, s.after, g, s.dim, me, s.axes);
      if (!pad) return reduce_scatter_v(dev, x, s.axes, d, counts, s.tensor);
      // Each member's rows moved to a slot of now.stored rows, zeros after them; the sum of the
      // padding is zeros.
      Shape wide = in;
      wide[d] = counts.size() * now.stored;
      xt::xarray<T> w = xt::zeros<T>(wide);
      std::size_t at = 0;
      for (std::size_t i = 0; i < counts.size(); ++i) {
        copy_rows(x.data(), in, at, counts[i], w.data(), wide, i * now.stored, d, t);
        at += counts[i];
      }
      return reduce_scatter(dev, w, s.axes, d, s.tensor);
    }
    case StepKind::all_to_all: {
      // The split leaves dim `dim` and joins `to_dim`: cut to_dim among the group, concatenate dim.
      const std::size_t to = static_cast<std::size_t>(s.to_dim);
      const auto cut = member_rows(mesh, s.after, g, s.to_dim, me, s.axes);
      const auto joined = member_rows(mesh, s.before, g, s.dim, me, s.axes);
      if (!pad) return all_to_all_v(dev, x, s.axes, to, d, cut, joined, s.tensor);
      const std::size_t slot = dim_block(mesh, s.after, g, to, me).stored;
      Shape wide = in;
      wide[to] = cut.size() * slot;
      xt::xarray<T> w = xt::zeros<T>(wide);
      std::size_t at = 0;
      for (std::size_t j = 0; j < cut.size(); ++j) {
        copy_rows(x.data(), in, at, cut[j], w.data(), wide, j * slot, to, t);
        at += cut[j];
      }
      const xt::xarray<T> y = all_to_all(dev, w, s.axes, to, d, s.tensor);
      xt::xarray<T> z = xt::zeros<T>(out_shape);
      at = 0;
      for (std::size_t i = 0; i < joined.size(); ++i) {
        copy_rows(y.data(), shape_of(y), i * was.stored, joined[i], z.data(), out_shape, at, d, t);
        at += joined[i];
      }
      return z;
    }
    default: break;
  }
  throw Error(ErrorKind::unsupported, "no uneven form of step " + step_kind_name(s.kind));
}

template xt::xarray<double> apply_uneven_step<double>(Device&, const PlanStep&, const xt::xarray<double>&);
template xt::xarray<float> apply_uneven_step<float>(Device&, const PlanStep&, const xt::xarray<float>&);
template xt::xarray<bfloat16> apply_uneven_step<bfloat16>(Device&, const PlanStep&, const xt::xarray<bfloat16>&);

}  // namespace shardlab
