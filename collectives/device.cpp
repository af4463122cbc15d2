#include "collectives/device.hpp"

#include <algorithm>

namespace shardlab {

Group Device::group(const std::vector<std::string>& axes) const {
  Group g;
  g.axes = axes;
  g.members = mesh_.group(id_, axes);
  g.me = static_cast<int>(std::find(g.members.begin(), g.members.end(), id_) - g.members.begin());
  return g;
}

Group Device::collective_group(const std::vector<std::string>& axes) {
  if (fault_.kind != FaultKind::wrong_axis || axis_swapped_ || axes.size() != 1) return group(axes);
  const std::vector<std::string>& names = mesh_.names();
  const int size = mesh_.sizes()[static_cast<std::size_t>(mesh_.axis(axes[0]))];
  for (std::size_t a = 0; a < names.size(); ++a)
    if (names[a] != axes[0] && mesh_.sizes()[a] == size) {
      axis_swapped_ = true;
      if (id_ == mesh_.devices() - 1) struck_ = true;
      return group({names[a]});
    }
  return group(axes);
}

unsigned char* Device::scratch(int slot, std::size_t bytes) {
  Scratch& s = scratch_[slot];
  if (s.size < bytes) {
    s.data.reset();  // free first: the old and new buffers need not both be mapped
    s.size = 0;      // stays consistent if the allocation below throws
    s.data.reset(new unsigned char[bytes]);
    s.size = bytes;
  }
  return s.data.get();
}

}  // namespace shardlab
