// Transport: moves bytes between devices, nothing more. Collective algorithms are written once on
// top of sendrecv; the sim (threads) and mpi (processes) transports only implement `exchange`.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace shardlab {

// The devices taking part in one collective: those that differ only along `axes`.
struct Group {
  std::vector<std::string> axes;
  std::vector<int> members;  // global device ids, in group order (row-major over axes)
  int me = 0;                // this device's position in members
  int size() const { return static_cast<int>(members.size()); }
  int next() const { return (me + 1) % size(); }
  int prev() const { return (me + size() - 1) % size(); }
};

struct TransportStats {
  std::size_t messages_sent = 0, bytes_sent = 0, messages_received = 0, bytes_received = 0;
};

enum class Channel { data = 1, control = 2, p2p = 3 };

class Transport {
 public:
  virtual ~Transport() = default;

  // Send sbytes to member `to` and receive rbytes from member `from` (positions in g), at once.
  // Payload: counted in stats(), which is what the ledger reads.
  void sendrecv(const Group& g, int to, const void* sbuf, std::size_t sbytes, int from, void* rbuf,
                std::size_t rbytes);
  // sendrecv of elements of type t where what arrives is added to `base` and the sum written to
  // `out` (rcount elements; out may be base) instead of stored: the reduction step of ring
  // ReduceScatter. Counted as one message each way, like sendrecv.
  // `op`: what "added" means (Reduce::max for an all-reduce of max).
  void sendrecv_add(const Group& g, int to, const void* sbuf, std::size_t scount, int from, const void* base,
                    void* out, std::size_t rcount, DType t, Reduce op = Reduce::sum);
  // Call signatures exchanged before a collective: not payload, not counted.
  void control_sendrecv(const Group& g, int to, const void* sbuf, std::size_t sbytes, int from, void* rbuf,
                        std::size_t rbytes);

  // Point-to-point, as pipeline stages pass activations and gradients: `to` and `from` are device
  // ids. send hands the payload over and returns without waiting for the receiver (the transport
  // keeps a copy until it is taken); recv blocks until device `from`'s next message arrives and
  // fails, naming both devices, when its size is not `bytes`. Payload: counted in stats().
  void send(int to, const void* buf, std::size_t bytes);
  void recv(int from, void* buf, std::size_t bytes);
  // Waits until every send of this device has been taken (MPI); a send nobody takes is then a
  // stuck device, which the run reports. Called when a device's program returns.
  virtual void finish_sends() {}

  const TransportStats& stats() const { return stats_; }

  // The transport library's own collectives (MPICH's, for --collectives native) on buffers of
  // elements of type t over group g (counts in elements). The default transport has none and
  // returns false.
  virtual bool native_all_reduce(const Group&, DType, void* /*buf*/, std::size_t /*n*/, Reduce /*op*/) {
    return false;
  }
  virtual bool native_all_gather(const Group&, DType, const void* /*in*/, std::size_t /*n*/, void* /*out*/) {
    return false;
  }
  virtual bool native_reduce_scatter(const Group&, DType, const void* /*in*/, std::size_t /*n_each*/, void* /*out*/) {
    return false;
  }
  virtual bool native_all_to_all(const Group&, DType, const void* /*in*/, std::size_t /*n_each*/, void* /*out*/) {
    return false;
  }
  // True when every data message carries the sender's activity (the call's signature) and the
  // receiver compares it with its own before it takes the payload: then a collective needs no
  // signature exchange of its own (the sim does this; MPI exchanges signatures first).
  virtual bool checks_signatures() const { return false; }
  // What this device is doing, for error messages about mismatched or stuck collectives.
  virtual void set_activity(const std::string& what) { activity_ = what; }
  const std::string& activity() const { return activity_; }

 protected:
  virtual void exchange(Channel ch, const Group& g, int to, const void* sbuf, std::size_t sbytes, int from,
                        void* rbuf, std::size_t rbytes) = 0;
  // Data exchange whose received elements are added to base into out. Default: exchange into a
  // scratch buffer, then add. A transport may overlap the adding with the receiving (MPI does) or
  // add straight from the sender's buffer (sim does).
  virtual void exchange_add(const Group& g, int to, const void* sbuf, std::size_t scount, int from,
                            const void* base, void* out, std::size_t rcount, DType t, Reduce op);
  virtual void p2p_send(int to, const void* buf, std::size_t bytes) = 0;
  virtual void p2p_recv(int from, void* buf, std::size_t bytes) = 0;
  // A receive buffer of at least `bytes`, kept for the next call: a fresh one costs page faults.
  void* incoming(std::size_t bytes);

 private:
  TransportStats stats_;
  std::string activity_;
  std::vector<double> incoming_;  // raw storage with 8-byte alignment for every element type
};

}  // namespace shardlab
