#include "collectives/sim.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstring>
#include <utility>

#include "core/error.hpp"

namespace shardlab {

SimWorld::SimWorld(int devices, double timeout)
    : n_(devices), wake_(devices), box_(devices), activity_(devices, "startup"),
      waiting_on_(devices, -1), waiting_for_(devices, Wait::none), waiting_channel_(devices, Channel::data),
      awaited_(devices, nullptr),
      finished_(devices, false),
      poll_(devices <= static_cast<int>(std::thread::hardware_concurrency()) ? 2000 : 50), timeout_(timeout) {
  posted_.reset(new std::atomic<std::size_t>[devices]);
  for (int i = 0; i < devices; ++i) posted_[i].store(0);
}

SimWorld::Buffer SimWorld::buffer_locked(std::size_t bytes) {
  // The smallest spare that fits; failing that, drop the largest spare (it is too small) so the
  // pool does not grow past what a run uses at once.
  std::size_t best = spare_.size();
  for (std::size_t i = 0; i < spare_.size(); ++i)
    if (spare_[i].capacity >= bytes && (best == spare_.size() || spare_[i].capacity < spare_[best].capacity)) best = i;
  Buffer b;
  if (best < spare_.size()) {
    b = std::move(spare_[best]);
    spare_.erase(spare_.begin() + static_cast<long>(best));
    return b;
  }
  if (!spare_.empty()) {  // every spare is too small: let the largest go, this one replaces it
    auto largest = std::max_element(spare_.begin(), spare_.end(),
                                    [](const Buffer& x, const Buffer& y) { return x.capacity < y.capacity; });
    spare_.erase(largest);
  }
  b.data.reset(new unsigned char[bytes ? bytes : 1]);  // default-initialised: not zero-filled
  b.capacity = bytes;
  return b;
}

namespace {
// Poll for a while, giving the core away between looks, before sleeping on a condition: waking a
// sleeping thread costs more than a 1 MiB copy, and on these VMs an idle core takes 50-200 us to
// wake. With no more devices than cores nobody else needs the core, so a device polls for up to
// 2 ms; with more, 50 us.
inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

template <class Ready>
void poll_briefly(std::chrono::microseconds limit, Ready ready) {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (int spins = 0; !ready() && std::chrono::steady_clock::now() < until; ++spins) {
    if (spins < 2000)
      spin_pause();
    else
      std::this_thread::yield();
  }
}
}  // namespace

void SimWorld::post(int src, int dst, Channel ch, const void* data, std::size_t bytes, const std::string& activity,
                    Receipt* lend) {
  Message m{ch, {}, lend ? data : nullptr, lend, bytes, activity};
  if (!lend) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (aborted_) throw Aborted{};
      m.buffer = buffer_locked(bytes);
    }
    if (bytes) std::memcpy(m.buffer.data.get(), data, bytes);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_) throw Aborted{};
  box_[dst][src].push_back(std::move(m));
  posted_[dst].fetch_add(1, std::memory_order_release);
  wake_[dst].notify_one();
}

namespace {
// Point-to-point messages queue apart from collectives' (as MPI's tags keep them apart): a send
// may wait in the mailbox while the two devices run a collective. Within each kind, FIFO.
bool same_kind(Channel a, Channel b) { return (a == Channel::p2p) == (b == Channel::p2p); }
template <class Box>
auto first_of(Box& box, Channel ch) {
  return std::find_if(box.begin(), box.end(), [ch](const auto& m) { return same_kind(m.channel, ch); });
}
}  // namespace

void SimWorld::take(int dst, int src, Channel ch, std::size_t bytes, const Delivery& to) {
  const Deadline deadline(timeout_);
  std::unique_lock<std::mutex> lock(mu_);
  if (aborted_) throw Aborted{};  // a lent buffer in the box may be gone
  auto& box = box_[dst][src];     // a reference into an unordered_map stays valid as it grows
  if (first_of(box, ch) == box.end()) {
    const std::size_t seen = posted_[dst].load(std::memory_order_relaxed);
    lock.unlock();
    poll_briefly(poll_, [&] { return posted_[dst].load(std::memory_order_acquire) != seen; });
    lock.lock();
  }
  waiting_on_[dst] = src;
  waiting_for_[dst] = Wait::message;
  waiting_channel_[dst] = ch;
  while (first_of(box, ch) == box.end() || aborted_) {
    if (!aborted_ && deadline.passed()) time_out_locked(dst, deadline.waited());
    if (aborted_ || abort_if_stuck_locked()) {
      waiting_on_[dst] = -1;
      waiting_for_[dst] = Wait::none;
      throw Aborted{};
    }
    wake_[dst].wait_until(lock, deadline.at());
  }
  waiting_on_[dst] = -1;
  waiting_for_[dst] = Wait::none;
  const auto it = first_of(box, ch);
  Message m = std::move(*it);
  box.erase(it);
  // Data moves only between devices in the same call: a ring of these checks (every member takes
  // from the one before it) is the signature exchange MPI does with a message of its own.
  if (to.activity && m.channel == ch && m.activity != *to.activity) {
    abort_locked(std::make_exception_ptr(Error(
        ErrorKind::mismatch, "collectives do not match: device " + std::to_string(dst) + " calls " + *to.activity +
                                 ", device " + std::to_string(src) + " calls " + m.activity)));
    throw Aborted{};
  }
  if (m.channel != ch || m.size != bytes) {
    std::string why = std::string(ch == Channel::p2p ? "messages" : "collectives") + " do not match: device " + std::to_string(dst) + " is in " + activity_[dst] +
                      " and expected " + std::to_string(bytes) + " bytes from device " + std::to_string(src) +
                      ", which is in " + m.activity + " and sent " + std::to_string(m.size) + " bytes";
    abort_locked(std::make_exception_ptr(Error(ErrorKind::mismatch, why)));
    throw Aborted{};
  }
  if (m.receipt) m.receipt->state.store(1, std::memory_order_relaxed);
  lock.unlock();
  const void* payload = m.receipt ? m.lent : static_cast<const void*>(m.buffer.data.get());
  if (to.add)
    combine_elements(to.type, to.op, to.out, to.base, payload, bytes / element_bytes(to.type));
  else if (bytes)
    std::memcpy(to.out, payload, bytes);
  lock.lock();
  if (m.receipt) {
    m.receipt->state.store(2, std::memory_order_release);
    wake_[src].notify_all();
  } else {
    spare_.push_back(std::move(m.buffer));
  }
}

void SimWorld::await_receipt(int src, int dst, Receipt& r) {
  const Deadline deadline(timeout_);
  poll_briefly(poll_, [&] { return r.state.load(std::memory_order_acquire) == 2; });
  std::unique_lock<std::mutex> lock(mu_);
  waiting_on_[src] = dst;
  waiting_for_[src] = Wait::receipt;
  awaited_[src] = &r;
  while (r.state.load(std::memory_order_relaxed) != 2) {
    // While the receiver reads (state 1) the buffer must stay: even an abort waits for that.
    if (r.state.load(std::memory_order_relaxed) == 0 && !aborted_ && deadline.passed())
      time_out_locked(src, deadline.waited());
    if (r.state.load(std::memory_order_relaxed) == 0 && (aborted_ || abort_if_stuck_locked())) {
      waiting_on_[src] = -1;
      waiting_for_[src] = Wait::none;
      awaited_[src] = nullptr;
      throw Aborted{};
    }
    wake_[src].wait_until(lock, deadline.at());
  }
  waiting_on_[src] = -1;
  waiting_for_[src] = Wait::none;
  awaited_[src] = nullptr;
}

void SimWorld::settle(int src, int dst, Receipt& r) {
  std::unique_lock<std::mutex> lock(mu_);
  while (r.state.load(std::memory_order_relaxed) == 1) wake_[src].wait(lock);
  // Never read: take it back, so nobody finds a pointer into a frame that is unwinding.
  auto& box = box_[dst][src];
  box.erase(std::remove_if(box.begin(), box.end(), [&](const Message& m) { return m.receipt == &r; }), box.end());
}

bool SimWorld::abort_if_stuck_locked() {
  // Stop only once no live device can move on: a device still running may yet find the more
  // telling error (two calls that do not match); a wait on a finished device counts as stuck.
  if (!all_stuck_locked()) return false;
  std::string why;
  for (int d = 0; d < n_ && why.empty(); ++d)
    if (!finished_[d] && waiting_on_[d] >= 0 && finished_[waiting_on_[d]])
      why = "device " + std::to_string(d) + " waits in " + activity_[d] + " for device " +
            std::to_string(waiting_on_[d]) + ", which finished its program without taking part";
  if (why.empty()) why = "collectives do not match, every device is stuck: " + stuck_report_locked();
  abort_locked(std::make_exception_ptr(Error(ErrorKind::mismatch, why)));
  return true;
}

void SimWorld::set_activity(int device, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  activity_[device] = what;
}

void SimWorld::finish(int device) {
  std::lock_guard<std::mutex> lock(mu_);
  finished_[device] = true;
  if (++finished_count_ == n_) all_finished_.notify_all();
  activity_[device] = "nothing (finished)";
  for (auto& w : wake_) w.notify_all();  // waiters re-check: their peer may be this device
}

void SimWorld::fail(int device, std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    abort_locked(std::make_exception_ptr(Error(e.kind(), e.what())));
  } catch (const std::exception& e) {
    abort_locked(std::make_exception_ptr(
        Error(ErrorKind::device, "device " + std::to_string(device) + " failed: " + e.what())));
  } catch (...) {
    abort_locked(std::make_exception_ptr(
        Error(ErrorKind::device, "device " + std::to_string(device) + " failed with an unknown exception")));
  }
}

std::exception_ptr SimWorld::first_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_error_;
}

std::exception_ptr SimWorld::take_first_error() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(first_error_, nullptr);
}

void SimWorld::abort_locked(std::exception_ptr error) {
  if (!aborted_) first_error_ = error;  // the first stays first, even once it has been taken
  aborted_ = true;
  for (auto& w : wake_) w.notify_all();
  all_finished_.notify_all();
}

bool SimWorld::wait_finished(std::chrono::milliseconds grace) {
  std::unique_lock<std::mutex> lock(mu_);
  all_finished_.wait(lock, [&] { return finished_count_ == n_ || timed_out_; });
  return all_finished_.wait_for(lock, grace, [&] { return finished_count_ == n_; });
}

void SimWorld::time_out_locked(int d, double waited) {
  // Not arrived: live devices that wait for nothing (computing, or stopped in their own code).
  std::vector<int> missing;
  for (int e = 0; e < n_; ++e)
    if (e != d && !finished_[e] && waiting_for_[e] == Wait::none) missing.push_back(e);
  const int peer = waiting_on_[d];
  std::string who;
  if (missing.empty() && peer >= 0 && finished_[peer]) {
    who = "device " + std::to_string(peer) + " finished its program without taking part";
  } else if (missing.empty()) {
    who = "device " + std::to_string(peer) + " has not answered (it is in " + activity_[peer] + ")";
  } else {
    std::string ids, where;
    for (std::size_t i = 0; i < missing.size(); ++i) {
      const std::string id = std::to_string(missing[i]);
      ids += (i ? ", " : "") + id;
      where += (i ? "; " : "") + (missing.size() == 1 ? std::string("it") : id) + " is in " + activity_[missing[i]];
    }
    who = (missing.size() == 1 ? "device " : "devices ") + ids + (missing.size() == 1 ? " has" : " have") +
          " not arrived (" + where + ")";
  }
  timed_out_ = true;
  abort_locked(std::make_exception_ptr(Error(
      ErrorKind::fault, "collective timeout (--collective-timeout " + seconds_text(timeout_) + "): device " +
                            std::to_string(d) + " waited " + seconds_text(waited) + " in " + activity_[d] +
                            " for device " + std::to_string(peer) + "; " + who)));
}

// Every live device waits, for a message whose mailbox is empty or for a receipt nobody is
// reading: only a device that takes a message could wake another, and none can.
bool SimWorld::all_stuck_locked() const {
  for (int d = 0; d < n_; ++d) {
    if (finished_[d]) continue;
    switch (waiting_for_[d]) {
      case Wait::none: return false;
      case Wait::message: {
        const auto box = box_[d].find(waiting_on_[d]);
        if (box != box_[d].end() && first_of(box->second, waiting_channel_[d]) != box->second.end()) return false;
        break;
      }
      case Wait::receipt:
        if (awaited_[d]->state.load(std::memory_order_relaxed) != 0) return false;
        break;
    }
  }
  return true;
}

std::string SimWorld::stuck_report_locked() const {
  std::string out;
  for (int d = 0; d < n_; ++d) {
    if (finished_[d]) continue;
    if (!out.empty()) out += "; ";
    out += "device " + std::to_string(d) + " in " + activity_[d];
    if (waiting_for_[d] == Wait::message) out += " waits for device " + std::to_string(waiting_on_[d]);
    if (waiting_for_[d] == Wait::receipt) out += " waits for device " + std::to_string(waiting_on_[d]) +
                                                 " to take its message";
  }
  return out;
}

void SimTransport::set_activity(const std::string& what) {
  Transport::set_activity(what);
  world_.set_activity(device_, what);
}

void SimTransport::exchange(Channel ch, const Group& g, int to, const void* sbuf, std::size_t sbytes, int from,
                            void* rbuf, std::size_t rbytes) {
  Delivery d{rbuf};
  if (ch == Channel::data) d.activity = &activity();
  move(ch, g.members[to], sbuf, sbytes, g.members[from], rbytes, d);
}

void SimTransport::exchange_add(const Group& g, int to, const void* sbuf, std::size_t scount, int from,
                                const void* base, void* out, std::size_t rcount, DType t, Reduce op) {
  const std::size_t eb = element_bytes(t);
  move(Channel::data, g.members[to], sbuf, scount * eb, g.members[from], rcount * eb,
       Delivery{out, base, t, true, &activity(), op});
}

void SimTransport::p2p_send(int to, const void* buf, std::size_t bytes) {
  world_.post(device_, to, Channel::p2p, buf, bytes, activity());
}

void SimTransport::p2p_recv(int from, void* buf, std::size_t bytes) {
  world_.take(device_, from, Channel::p2p, buf, bytes);
}

void SimTransport::move(Channel ch, int to, const void* sbuf, std::size_t sbytes, int from, std::size_t rbytes,
                        const Delivery& d) {
  // Below this a copy into the mailbox costs less than the receipt's handshake.
  constexpr std::size_t kLendBytes = 32 * 1024;
  // Posting first and then taking never deadlocks a ring: an eager send does not wait, and a lent
  // one is waited for only after this device's own take.
  if (ch != Channel::data || sbytes < kLendBytes) {
    world_.post(device_, to, ch, sbuf, sbytes, activity());
    world_.take(device_, from, ch, rbytes, d);
    return;
  }
  Receipt r;
  world_.post(device_, to, ch, sbuf, sbytes, activity(), &r);
  try {
    world_.take(device_, from, ch, rbytes, d);
  } catch (...) {
    world_.settle(device_, to, r);
    throw;
  }
  world_.await_receipt(device_, to, r);
}

}  // namespace shardlab
