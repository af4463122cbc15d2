// CollectivePermute: every member of a group sends its whole block to one other member, given by
// a permutation of the group's positions; a shift by k on a ring (r -> r + k mod n) is the step
// of ring attention (lesson 19), and its gradient is the shift by -k.
//
//   collective_permute  member r's block goes to member perm[r]; it receives the block of the
//                       member that sends to it. One sendrecv per member (algorithm "direct"):
//                       each member that moves sends its block once, one message; a member that
//                       perm leaves in place keeps its block and sends nothing.
//
// Ledger: op "collective_permute", one row per member; predicted bytes (collectives/predict.cpp):
// the input, the largest sender's. Cost (harness/cost/): a shift by one member, a + n b on a
// switch; on a torus, an axis without wraparound sends its last device's block back along the
// line (harness/cost/topology.cpp). --inject stale-receive: the last device keeps its own block
// in place of the one that came (collectives/fault.hpp's "reuses what it had").
#pragma once
#include <string>
#include <vector>

#include "collectives/device.hpp"
#include "core/tensor.hpp"

namespace shardlab {

// perm[r]: the position in the group of the member that member r's block goes to; every member
// passes the same perm, a permutation of 0..n-1 (else Error(unsupported)). The identity moves
// nothing and writes no ledger row. The wire carries dev.dtype(); T is double, float or bfloat16.
template <class T>
xt::xarray<T> collective_permute(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                                 const std::vector<int>& perm, const std::string& tensor);
// collective_permute by perm[r] = r + shift mod n.
template <class T>
xt::xarray<T> collective_shift(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                               int shift, const std::string& tensor);
std::vector<int> shift_permutation(int n, int shift);

}  // namespace shardlab
