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

}  // namespace shardlab
