// CollectivePermute: member r sends its whole block to member perm[r] and receives the block of
// the member that sends to it, in one sendrecv (a member that sends to itself keeps its block and
// moves nothing). A shift by k on a ring: perm[r] = r + k mod n. The block travels in the device's
// element type, converted on the way in and out when the program holds another.
#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/call.hpp"
#include "collectives/permute.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"

namespace shardlab {

namespace {

std::string perm_text(const std::vector<int>& perm) {
  std::string t = "[";
  for (std::size_t i = 0; i < perm.size(); ++i) t += (i ? " " : "") + std::to_string(perm[i]);
  return t + "]";
}

// The member sending to each member; Error(unsupported) unless perm is a permutation of 0..n-1.
std::vector<int> inverse(const std::vector<int>& perm, int n, const std::string& tensor,
                         const std::vector<std::string>& axes) {
  std::vector<int> inv(n, -1);
  bool ok = static_cast<int>(perm.size()) == n;
  for (std::size_t r = 0; ok && r < perm.size(); ++r) {
    ok = perm[r] >= 0 && perm[r] < n && inv[perm[r]] < 0;
    if (ok) inv[perm[r]] = static_cast<int>(r);
  }
  if (!ok)
    throw Error(ErrorKind::unsupported, "collective_permute of " + tensor + " over " + axes_text(axes) + ": " +
                                            perm_text(perm) + " is not a permutation of the group's " +
                                            std::to_string(n) + " members 0-" + std::to_string(n - 1));
  return inv;
}

}  // namespace

std::vector<int> shift_permutation(int n, int shift) {
  std::vector<int> perm(n);
  for (int r = 0; r < n; ++r) perm[r] = (((r + shift) % n) + n) % n;
  return perm;
}

template <class T>
xt::xarray<T> collective_permute(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                                 const std::vector<int>& perm, const std::string& tensor) {
  Group g = dev.collective_group(axes);
  const int n = g.size();
  const std::vector<int> inv = inverse(perm, n, tensor, axes);
  bool identity = true;
  for (int r = 0; r < n; ++r) identity = identity && perm[r] == r;
  if (identity) return local;  // nothing moves: no call, no ledger row
  const DType w = dev.dtype();
  const std::size_t eb = dev.element_bytes(), bytes = local.size() * eb;
  const Shape shape = shape_of(local);
  CallRecord rec(dev, g, "collective_permute", tensor, "direct", bytes,
                 "collective_permute over " + axes_text(axes) + " of " + tensor + shape_text(shape) + " by " +
                     perm_text(perm));
  xt::xarray<T> out = xt::empty<T>(shape);
  const int to = perm[g.me], from = inv[g.me];
  if (to == g.me) {
    out = local;
  } else {
    const bool same = dtype_of<T>() == w;
    const unsigned char* send = reinterpret_cast<const unsigned char*>(local.data());
    if (!same) {
      unsigned char* packed = dev.scratch(0, bytes);
      convert_elements(dtype_of<T>(), local.data(), w, packed, local.size());
      send = packed;
    }
    unsigned char* recv = same ? reinterpret_cast<unsigned char*>(out.data()) : dev.scratch(1, bytes);
    dev.transport().sendrecv(g, to, send, bytes, from, recv, bytes);
    if (dev.strike(FaultKind::stale_receive))  // --inject: the block it had, not the one that came
      std::memcpy(recv, send, bytes);
    if (!same) convert_elements(w, recv, dtype_of<T>(), out.data(), out.size());
  }
  rec.done(out.size() * eb);
  return out;
}

template <class T>
xt::xarray<T> collective_shift(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                               int shift, const std::string& tensor) {
  return collective_permute(dev, local, axes, shift_permutation(dev.group(axes).size(), shift), tensor);
}

#define SHARDLAB_PERMUTE(T)                                                                                    \
  template xt::xarray<T> collective_permute<T>(Device&, const xt::xarray<T>&, const std::vector<std::string>&, \
                                               const std::vector<int>&, const std::string&);                   \
  template xt::xarray<T> collective_shift<T>(Device&, const xt::xarray<T>&, const std::vector<std::string>&,   \
                                             int, const std::string&);
SHARDLAB_PERMUTE(double)
SHARDLAB_PERMUTE(float)
SHARDLAB_PERMUTE(bfloat16)
#undef SHARDLAB_PERMUTE

}  // namespace shardlab
