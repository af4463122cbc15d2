#include "collectives/call.hpp"

#include <cstring>

#include "collectives/predict.hpp"
#include "core/error.hpp"
#include "core/mesh.hpp"

namespace shardlab {

namespace {
constexpr std::size_t kSignatureBytes = 200;

// Each member sends its signature to the next member of the ring and compares with the one from
// the previous: if every neighbour pair agrees, the whole group agrees.
void check_group_agrees(Device& dev, const Group& g, const std::string& signature) {
  if (g.size() == 1) return;
  char mine[kSignatureBytes] = {0}, theirs[kSignatureBytes] = {0};
  std::strncpy(mine, signature.c_str(), kSignatureBytes - 1);
  dev.transport().control_sendrecv(g, g.next(), mine, kSignatureBytes, g.prev(), theirs, kSignatureBytes);
  if (std::strncmp(mine, theirs, kSignatureBytes) != 0) {
    throw Error(ErrorKind::mismatch, "collectives do not match within the group over " + axes_text(g.axes) +
                                         ": device " + std::to_string(dev.id()) + " calls " + signature +
                                         ", device " + std::to_string(g.members[g.prev()]) + " calls " + theirs);
  }
}
}  // namespace

CallRecord::CallRecord(Device& dev, const Group& group, const std::string& op, const std::string& tensor,
                       const std::string& algorithm, std::size_t input_bytes, const std::string& signature)
    : dev_(dev) {
  row_.device = dev.id();
  row_.op = op;
  row_.axes = axes_text(group.axes);
  row_.tensor = tensor;
  row_.algorithm = algorithm;
  row_.group_size = group.size();
  row_.element_bytes = dev.element_bytes();
  row_.input_bytes = input_bytes;
  dev.transport().set_activity(signature);
  if (!dev.transport().checks_signatures()) check_group_agrees(dev, group, signature);
  before_ = dev.transport().stats();
  start_ = std::chrono::steady_clock::now();
  row_.start_us = std::chrono::duration<double, std::micro>(start_.time_since_epoch()).count();
}

CallRecord::CallRecord(Device& dev, const std::string& op, int peer, const std::string& tensor, std::size_t input_bytes)
    : dev_(dev) {
  row_.device = dev.id();
  row_.op = op;
  row_.peer = peer;
  row_.tensor = tensor;
  row_.algorithm = "p2p";
  row_.group_size = 2;
  row_.element_bytes = dev.element_bytes();
  row_.input_bytes = input_bytes;
  before_ = dev.transport().stats();
  start_ = std::chrono::steady_clock::now();
  row_.start_us = std::chrono::duration<double, std::micro>(start_.time_since_epoch()).count();
}

void CallRecord::done(std::size_t output_bytes, bool modeled) {
  row_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  row_.output_bytes = output_bytes;
  row_.modeled = modeled;
  if (modeled) {
    row_.bytes_sent = row_.bytes_received =
        predicted_bytes_sent(row_.op, row_.group_size, row_.input_bytes, row_.element_bytes);
    row_.messages = predicted_messages(row_.op, row_.group_size);
  } else {
    const auto& after = dev_.transport().stats();
    row_.messages = after.messages_sent - before_.messages_sent;
    row_.bytes_sent = after.bytes_sent - before_.bytes_sent;
    row_.bytes_received = after.bytes_received - before_.bytes_received;
  }
  dev_.ledger().add(row_);
  dev_.transport().set_activity("local work after " + row_.op + " of " + row_.tensor);
}

}  // namespace shardlab
