// send / recv: one block from one device to another, through the transport's point-to-point path,
// converted to the wire's element type and counted in a ledger row on each side.
#include "collectives/call.hpp"
#include "collectives/collectives.hpp"
#include "core/error.hpp"
#include "core/text.hpp"

namespace shardlab {

namespace {

void check_peer(const Device& dev, int peer, const std::string& what) {
  if (peer < 0 || peer >= dev.mesh().devices() || peer == dev.id())
    throw Error(ErrorKind::unsupported, "device " + std::to_string(dev.id()) + " cannot " + what + " device " +
                                            std::to_string(peer) + " (devices 0-" +
                                            std::to_string(dev.mesh().devices() - 1) + ", not itself)");
}

}  // namespace

void send(Device& dev, const Tensor& block, int to, const std::string& tensor) {
  check_peer(dev, to, "send to");
  const std::size_t bytes = block.size() * dev.element_bytes();
  dev.transport().set_activity("send of " + tensor + shape_text(shape_of(block)) + " to device " + std::to_string(to));
  CallRecord rec(dev, "send", to, tensor, bytes);
  unsigned char* wire = dev.scratch(0, bytes);
  convert_elements(DType::float64, block.data(), dev.dtype(), wire, block.size());
  dev.transport().send(to, wire, bytes);
  rec.done(0);
}

Tensor recv(Device& dev, int from, const Shape& shape, const std::string& tensor) {
  check_peer(dev, from, "receive from");
  Tensor out = xt::empty<double>(shape);
  const std::size_t bytes = out.size() * dev.element_bytes();
  dev.transport().set_activity("recv of " + tensor + shape_text(shape) + " from device " + std::to_string(from));
  CallRecord rec(dev, "recv", from, tensor, 0);
  unsigned char* wire = dev.scratch(0, bytes);
  dev.transport().recv(from, wire, bytes);
  convert_elements(dev.dtype(), wire, DType::float64, out.data(), out.size());
  rec.done(bytes);
  return out;
}

}  // namespace shardlab
