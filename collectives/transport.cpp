#include "collectives/transport.hpp"

#include <vector>

namespace shardlab {

void Transport::sendrecv(const Group& g, int to, const void* sbuf, std::size_t sbytes, int from, void* rbuf,
                         std::size_t rbytes) {
  exchange(Channel::data, g, to, sbuf, sbytes, from, rbuf, rbytes);
  // Counted only once the transport has moved the bytes.
  stats_.messages_sent += 1;
  stats_.bytes_sent += sbytes;
  stats_.messages_received += 1;
  stats_.bytes_received += rbytes;
}

void Transport::sendrecv_add(const Group& g, int to, const void* sbuf, std::size_t scount, int from,
                             const void* base, void* out, std::size_t rcount, DType t, Reduce op) {
  exchange_add(g, to, sbuf, scount, from, base, out, rcount, t, op);
  const std::size_t eb = element_bytes(t);
  stats_.messages_sent += 1;
  stats_.bytes_sent += scount * eb;
  stats_.messages_received += 1;
  stats_.bytes_received += rcount * eb;
}

void Transport::send(int to, const void* buf, std::size_t bytes) {
  p2p_send(to, buf, bytes);
  stats_.messages_sent += 1;
  stats_.bytes_sent += bytes;
}

void Transport::recv(int from, void* buf, std::size_t bytes) {
  p2p_recv(from, buf, bytes);
  stats_.messages_received += 1;
  stats_.bytes_received += bytes;
}

void* Transport::incoming(std::size_t bytes) {
  if (incoming_.size() * sizeof(double) < bytes) incoming_.resize((bytes + 7) / 8);
  return incoming_.data();
}

void Transport::exchange_add(const Group& g, int to, const void* sbuf, std::size_t scount, int from,
                             const void* base, void* out, std::size_t rcount, DType t, Reduce op) {
  const std::size_t eb = element_bytes(t);
  void* in = incoming(rcount * eb);
  exchange(Channel::data, g, to, sbuf, scount * eb, from, in, rcount * eb);
  combine_elements(t, op, out, base, in, rcount);
}

void Transport::control_sendrecv(const Group& g, int to, const void* sbuf, std::size_t sbytes, int from,
                                 void* rbuf, std::size_t rbytes) {
  exchange(Channel::control, g, to, sbuf, sbytes, from, rbuf, rbytes);
}

}  // namespace shardlab
