// The sim backend: every device is a std::thread in this process. Messages go through blocking
// mailboxes (one FIFO per sender->receiver pair) under one mutex; waiting is on condition
// variables after a short poll (50 us; 2 ms while there are no more devices than cores), so 64
// devices run on 2 cores.
//
// Small messages are copied into a mailbox buffer (eager, like MPI's). A large data message is
// lent instead: the mailbox holds a pointer to the sender's own buffer, the receiver copies (or
// adds) straight from it into its destination, and the sender waits for that receipt before its
// exchange returns (rendezvous). One copy per message instead of two.
//
// Nothing hangs: once every live device waits on an empty mailbox (some perhaps on a device that
// has finished), the run stops with a message naming what the devices were doing; an exception
// on one device wakes and stops all the others. A device that waits longer than the collective
// timeout (collectives/watchdog.hpp) for one that never arrives (still computing, say) stops the
// run with Error(ErrorKind::fault) naming the devices that have not arrived.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "collectives/transport.hpp"
#include "collectives/watchdog.hpp"

namespace shardlab {

// Thrown on devices stopped because another device failed; the runtime reports the first failure.
struct Aborted {};

// A lent message's state, on the sender's stack: posted (0), being read by the receiver (1), read (2).
struct Receipt {
  std::atomic<int> state{0};
};

// What take() does with a payload: copy it to `out`, or (add) write base + payload to out as
// elements of `type`. With `activity`, the message must have been posted in that activity (the
// call signature the receiver is in), else the run stops with a mismatch.
struct Delivery {
  void* out = nullptr;
  const void* base = nullptr;
  DType type = DType::float64;
  bool add = false;
  const std::string* activity = nullptr;
  Reduce op = Reduce::sum;  // with add: how received elements combine with base
};

class SimWorld {
 public:
  // `timeout`: seconds a device may wait for another before the run stops (fault).
  explicit SimWorld(int devices, double timeout = collective_timeout());

  // With `lend`, data is not copied: it must stay unchanged until await_receipt(src, dst, *lend).
  void post(int src, int dst, Channel ch, const void* data, std::size_t bytes, const std::string& activity,
            Receipt* lend = nullptr);
  // Blocks until src's next message to dst arrives; checks it is the channel and size expected.
  void take(int dst, int src, Channel ch, std::size_t bytes, const Delivery& to);
  void take(int dst, int src, Channel ch, void* data, std::size_t bytes) { take(dst, src, ch, bytes, Delivery{data}); }
  // Blocks until dst has read the message src lent it. After an abort: throws Aborted, but never
  // while the receiver is still reading (the buffer must outlive that).
  void await_receipt(int src, int dst, Receipt& r);
  // After a failure between post and await: returns once nobody reads the lent buffer, with the
  // message withdrawn from dst's mailbox if it was never taken.
  void settle(int src, int dst, Receipt& r);

  void set_activity(int device, const std::string& what);
  void finish(int device);                                      // device's program returned
  void fail(int device, std::exception_ptr error);              // device's program threw
  std::exception_ptr first_error() const;
  // Moves the first error out, so the thread that rethrows it holds its only reference: a device
  // left behind (detached) must not be the one that later frees the exception object the caller
  // is still reading (ThreadSanitizer cannot see libstdc++'s reference count, and rightly asks
  // for an ordering it can see).
  std::exception_ptr take_first_error();
  // Blocks until every device has finished, or, once a device timed out, for at most `grace`
  // more (a device stuck in its own computation never finishes). True when all finished.
  bool wait_finished(std::chrono::milliseconds grace);

 private:
  // Message payloads live in buffers recycled through spare_: a buffer is not zero-filled, and
  // once the world has seen a run's sizes no post maps fresh pages.
  struct Buffer {
    std::unique_ptr<unsigned char[]> data;
    std::size_t capacity = 0;
  };
  struct Message {
    Channel channel;
    Buffer buffer;                          // eager: a copy of the payload
    const void* lent = nullptr;             // rendezvous: the sender's buffer
    Receipt* receipt = nullptr;
    std::size_t size = 0;
    std::string activity;  // sender's activity when it posted
  };
  enum class Wait { none, message, receipt };  // what a blocked device waits for, from waiting_on_
  Buffer buffer_locked(std::size_t bytes);  // a spare one that fits, or a new one
  void abort_locked(std::exception_ptr error);
  // Aborts with a message naming the devices when no live device can move on; then true.
  bool abort_if_stuck_locked();
  bool all_stuck_locked() const;
  std::string stuck_report_locked() const;
  // Device d waited past the timeout: aborts the run with Error(fault) naming who has not arrived.
  void time_out_locked(int d, double waited);

  const int n_;
  mutable std::mutex mu_;
  std::vector<std::condition_variable> wake_;  // one per device
  // box_[dst][src]: made when src first posts to dst, so memory grows with the pairs that talk (a
  // ring: 2 per device), not with every pair (4096 devices: 16.7 million empty deques, 11 GB).
  std::vector<std::unordered_map<int, std::deque<Message>>> box_;
  std::vector<Buffer> spare_;                  // returned by take(), reused by post()
  // Messages ever posted to each device, readable without the lock: take() polls it for a moment
  // before it sleeps, since waking a sleeping thread costs more than a 1 MiB copy.
  std::unique_ptr<std::atomic<std::size_t>[]> posted_;
  std::vector<std::string> activity_;
  std::vector<int> waiting_on_;                // -1, or the device a device blocks on
  std::vector<Wait> waiting_for_;
  std::vector<Channel> waiting_channel_;       // the channel a device waits on (Wait::message)
  std::vector<const Receipt*> awaited_;        // the receipt a device waits for (Wait::receipt)
  std::vector<bool> finished_;
  bool aborted_ = false;
  std::exception_ptr first_error_;
  const std::chrono::microseconds poll_;  // how long a device polls before it sleeps
  const double timeout_;                  // seconds a device may wait
  int finished_count_ = 0;
  bool timed_out_ = false;
  std::condition_variable all_finished_;
};

class SimTransport : public Transport {
 public:
  SimTransport(SimWorld& world, int device) : world_(world), device_(device) {}
  void set_activity(const std::string& what) override;
  bool checks_signatures() const override { return true; }

 protected:
  void exchange(Channel ch, const Group& g, int to, const void* sbuf, std::size_t sbytes, int from, void* rbuf,
                std::size_t rbytes) override;
  // Adds straight from the sender's buffer: no receive buffer, no second pass.
  void exchange_add(const Group& g, int to, const void* sbuf, std::size_t scount, int from, const void* base,
                    void* out, std::size_t rcount, DType t, Reduce op) override;
  // Eager: the payload is copied into the receiver's mailbox; the receive takes it from there.
  void p2p_send(int to, const void* buf, std::size_t bytes) override;
  void p2p_recv(int from, void* buf, std::size_t bytes) override;

 private:
  void move(Channel ch, int to, const void* sbuf, std::size_t sbytes, int from, std::size_t rbytes,
            const Delivery& d);

  SimWorld& world_;
  int device_;
};

}  // namespace shardlab
