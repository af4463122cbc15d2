// Plan steps on uneven blocks: a dim that does not divide its mesh axes, split as the
// mesh's Uneven rule says (core/mesh.hpp, core/layout.hpp's dim_block).
//
//   chunk  blocks of different lengths: AllGather, ReduceScatter and AllToAll move exactly the
//          real rows (collectives.hpp's _v forms, counts from the layout); a slice takes its rows
//   pad    every block ceil(d/n) rows, zeros after the real ones: the even collectives move the
//          padded blocks (padding is sent and counted), and a local copy puts the real rows where
//          the new layout wants them (the padding of a gathered block sits between real rows)
//
// AllReduce never changes a layout, so it needs nothing new. A step is uneven when the dim it
// acts on (or moves the split to) does not divide before or after it; other steps run as before,
// byte for byte.
#pragma once
#include <cstddef>

#include "harness/plan/planner.hpp"

namespace shardlab {

// Whether step `kind` on dims `dim` / `to_dim` between `before` and `after` of a tensor of shape
// `global` needs the uneven forms (never under Uneven::none).
bool step_is_uneven(const Mesh& mesh, StepKind kind, int dim, int to_dim, const Spec& before, const Spec& after,
                    const Shape& global);

// Bytes the busiest device sends in that step: each device's own count from the layout (the ring
// and pairwise formulas of collectives/predict.hpp over its group's parts), the largest kept.
std::size_t uneven_step_bytes(const Mesh& mesh, StepKind kind, const std::vector<std::string>& axes, int dim,
                              int to_dim, const Spec& before, const Spec& after, const Shape& global,
                              std::size_t element_bytes);

// Runs step s (s.global set) on this device's block x as stored; returns its block under s.after.
template <class T>
xt::xarray<T> apply_uneven_step(Device& dev, const PlanStep& s, const xt::xarray<T>& x);

}  // namespace shardlab
