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

void Transport::sendrecv_add(const Group& g, int to, const double* sbuf, std::size_t scount, int from, double* acc,
                             std::size_t rcount) {
  exchange_add(g, to, sbuf, scount, from, acc, rcount);
  stats_.messages_sent += 1;
  stats_.bytes_sent += scount * sizeof(double);
  stats_.messages_received += 1;
  stats_.bytes_received += rcount * sizeof(double);
}

void Transport::exchange_add(const Group& g, int to, const double* sbuf, std::size_t scount, int from, double* acc,
                             std::size_t rcount) {
  // Reused across calls (one per device thread): a fresh buffer per call costs page faults.
  static thread_local std::vector<double> incoming;
  incoming.resize(rcount);
  exchange(Channel::data, g, to, sbuf, scount * sizeof(double), from, incoming.data(), rcount * sizeof(double));
  for (std::size_t i = 0; i < rcount; ++i) acc[i] += incoming[i];
}

void Transport::control_sendrecv(const Group& g, int to, const void* sbuf, std::size_t sbytes, int from,
                                 void* rbuf, std::size_t rbytes) {
  exchange(Channel::control, g, to, sbuf, sbytes, from, rbuf, rbytes);
}

}  // namespace shardlab
