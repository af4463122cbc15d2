// The sim backend: every device is a std::thread in this process. Messages go through blocking
// mailboxes (one FIFO per sender->receiver pair) under one mutex; waiting is on condition
// variables, never spinning, so 64 devices run on 2 cores.
//
// Nothing hangs: once every live device waits on an empty mailbox (some perhaps on a device that
// has finished), the run stops with a message naming what the devices were doing; an exception
// on one device wakes and stops all the others.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/transport.hpp"

namespace shardlab {

// Thrown on devices stopped because another device failed; the runtime reports the first failure.
struct Aborted {};

class SimWorld {
 public:
  explicit SimWorld(int devices);

  void post(int src, int dst, Channel ch, const void* data, std::size_t bytes, const std::string& activity);
  // Blocks until src's next message to dst arrives; checks it is the channel and size expected.
  void take(int dst, int src, Channel ch, void* data, std::size_t bytes);

  void set_activity(int device, const std::string& what);
  void finish(int device);                                      // device's program returned
  void fail(int device, std::exception_ptr error);              // device's program threw
  std::exception_ptr first_error() const { return first_error_; }

 private:
  // Message payloads live in buffers recycled through spare_: a buffer is not zero-filled, and
  // once the world has seen a run's sizes no post maps fresh pages.
  struct Buffer {
    std::unique_ptr<unsigned char[]> data;
    std::size_t capacity = 0;
  };
  struct Message {
    Channel channel;
    Buffer buffer;
    std::size_t size = 0;
    std::string activity;  // sender's activity when it posted
  };
  Buffer buffer_locked(std::size_t bytes);  // a spare one that fits, or a new one
  void abort_locked(std::exception_ptr error);
  bool all_stuck_locked() const;
  std::string stuck_report_locked() const;

  const int n_;
  mutable std::mutex mu_;
  std::vector<std::condition_variable> wake_;  // one per device
  std::vector<std::deque<Message>> box_;       // box_[dst * n + src]
  std::vector<Buffer> spare_;                  // returned by take(), reused by post()
  // Messages ever posted to each box, readable without the lock: take() polls it for a moment
  // before it sleeps, since waking a sleeping thread costs more than a 1 MiB copy.
  std::unique_ptr<std::atomic<std::size_t>[]> posted_;
  std::vector<std::size_t> taken_;             // messages taken from each box (under mu_)
  std::vector<std::string> activity_;
  std::vector<int> waiting_on_;                // -1, or the src a device blocks on
  std::vector<bool> finished_;
  bool aborted_ = false;
  std::exception_ptr first_error_;
};

class SimTransport : public Transport {
 public:
  SimTransport(SimWorld& world, int device) : world_(world), device_(device) {}
  void set_activity(const std::string& what) override;

 protected:
  void exchange(Channel ch, const Group& g, int to, const void* sbuf, std::size_t sbytes, int from, void* rbuf,
                std::size_t rbytes) override;

 private:
  SimWorld& world_;
  int device_;
};

}  // namespace shardlab
