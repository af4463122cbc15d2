// Transport: moves bytes between devices, nothing more. Collective algorithms are written once on
// top of sendrecv; the sim (threads) and mpi (processes) transports only implement `exchange`.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

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

enum class Channel { data = 1, control = 2 };

class Transport {
 public:
  virtual ~Transport() = default;

  // Send sbytes to member `to` and receive rbytes from member `from` (positions in g), at once.
  // Payload: counted in stats(), which is what the ledger reads.
  void sendrecv(const Group& g, int to, const void* sbuf, std::size_t sbytes, int from, void* rbuf,
                std::size_t rbytes);
  // Call signatures exchanged before a collective: not payload, not counted.
  void control_sendrecv(const Group& g, int to, const void* sbuf, std::size_t sbytes, int from, void* rbuf,
                        std::size_t rbytes);

  const TransportStats& stats() const { return stats_; }

  // The transport library's own collectives (MPICH's, for --collectives native) on buffers of
  // doubles over group g. The default transport has none and returns false.
  virtual bool native_all_reduce(const Group&, double* /*buf*/, std::size_t /*n*/) { return false; }
  virtual bool native_all_gather(const Group&, const double* /*in*/, std::size_t /*n*/, double* /*out*/) { return false; }
  virtual bool native_reduce_scatter(const Group&, const double* /*in*/, std::size_t /*n_each*/, double* /*out*/) {
    return false;
  }
  virtual bool native_all_to_all(const Group&, const double* /*in*/, std::size_t /*n_each*/, double* /*out*/) {
    return false;
  }
  // What this device is doing, for error messages about mismatched or stuck collectives.
  virtual void set_activity(const std::string& what) { activity_ = what; }
  const std::string& activity() const { return activity_; }

 protected:
  virtual void exchange(Channel ch, const Group& g, int to, const void* sbuf, std::size_t sbytes, int from,
                        void* rbuf, std::size_t rbytes) = 0;

 private:
  TransportStats stats_;
  std::string activity_;
};

}  // namespace shardlab
