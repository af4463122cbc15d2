#include "collectives/transport.hpp"

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

void Transport::control_sendrecv(const Group& g, int to, const void* sbuf, std::size_t sbytes, int from,
                                 void* rbuf, std::size_t rbytes) {
  exchange(Channel::control, g, to, sbuf, sbytes, from, rbuf, rbytes);
}

}  // namespace shardlab
