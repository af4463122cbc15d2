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

void Transport::sendrecv_add(const Group& g, int to, const void* sbuf, std::size_t scount, int from, void* acc,
                             std::size_t rcount, DType t) {
  exchange_add(g, to, sbuf, scount, from, acc, rcount, t);
  const std::size_t eb = element_bytes(t);
  stats_.messages_sent += 1;
  stats_.bytes_sent += scount * eb;
  stats_.messages_received += 1;
  stats_.bytes_received += rcount * eb;
}

void Transport::exchange_add(const Group& g, int to, const void* sbuf, std::size_t scount, int from, void* acc,
                             std::size_t rcount, DType t) {
  // Reused across calls (one per device thread): a fresh buffer per call costs page faults.
  // std::vector<double> as raw storage keeps 8-byte alignment for every element type.
  static thread_local std::vector<double> incoming;
  const std::size_t eb = element_bytes(t);
  if (incoming.size() * sizeof(double) < rcount * eb) incoming.resize((rcount * eb + 7) / 8);
  exchange(Channel::data, g, to, sbuf, scount * eb, from, incoming.data(), rcount * eb);
  add_into(t, acc, incoming.data(), rcount);
}

void Transport::control_sendrecv(const Group& g, int to, const void* sbuf, std::size_t sbytes, int from,
                                 void* rbuf, std::size_t rbytes) {
  exchange(Channel::control, g, to, sbuf, sbytes, from, rbuf, rbytes);
}

}  // namespace shardlab
