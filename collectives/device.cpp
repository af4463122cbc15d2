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
