// Replay collectives: the same results as the ring and pairwise collectives (collectives.hpp),
// bit for bit, written a second time from their definitions instead of from the ring's steps.
// A replayed run (Runtime, in bfloat16) runs the program again with these in place of the real
// collectives and no fault planted; its outputs must equal the real run's bit for bit.
//
// Each member sends its whole block to every other member (n-1 plain exchanges), so every member
// holds all n inputs, and then computes its own result as the collective defines it:
//   all_gather       the blocks concatenated along dim, each rounded through the wire type
//   all_to_all      slice `me` of every member's block (along split_dim), concatenated along
//                   concat_dim in member order
//   reduce_scatter  slice `me`; all_reduce: every chunk c of the flat block (the ring cuts it
//                   into n chunks, the first size % n one element longer). A chunk c is summed in
//                   the wire type starting from member c+1's, adding c+2, ..., n-1, 0, ..., c, one
//                   rounded add at a time: the order in which the ring's partial sums travel.
// What the real collectives and these share is the transport's byte exchange, the element type's
// conversion and add (core/dtype.hpp, tested on bit patterns), and Group; not the ring's chunk
// offsets, step schedule, packing, in-place paths or fault injection.
#pragma once
#include <string>
#include <vector>

#include "collectives/device.hpp"
#include "core/dtype.hpp"
#include "core/tensor.hpp"

namespace shardlab {

// counts empty: even blocks. Instantiated for double, float and bfloat16.
template <class T>
xt::xarray<T> replay_all_gather(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                                std::size_t dim, const std::vector<std::size_t>& counts, const std::string& tensor);
template <class T>
xt::xarray<T> replay_reduce_scatter(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                                    std::size_t dim, const std::vector<std::size_t>& counts,
                                    const std::string& tensor);
template <class T>
xt::xarray<T> replay_all_reduce(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                                Reduce op, const std::string& tensor);
// split_counts and concat_counts empty: even slices.
template <class T>
xt::xarray<T> replay_all_to_all(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                                std::size_t split_dim, std::size_t concat_dim,
                                const std::vector<std::size_t>& split_counts,
                                const std::vector<std::size_t>& concat_counts, const std::string& tensor);

}  // namespace shardlab
