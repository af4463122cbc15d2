#include "collectives/sim.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstring>

#include "core/error.hpp"

namespace shardlab {

SimWorld::SimWorld(int devices)
    : n_(devices), wake_(devices), box_(static_cast<std::size_t>(devices) * devices), activity_(devices, "startup"),
      waiting_on_(devices, -1), finished_(devices, false) {
  const std::size_t boxes = static_cast<std::size_t>(devices) * devices;
  posted_.reset(new std::atomic<std::size_t>[boxes]);
  for (std::size_t i = 0; i < boxes; ++i) posted_[i].store(0);
  taken_.assign(boxes, 0);
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

void SimWorld::post(int src, int dst, Channel ch, const void* data, std::size_t bytes, const std::string& activity) {
  Message m{ch, {}, bytes, activity};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) throw Aborted{};
    m.buffer = buffer_locked(bytes);
  }
  if (bytes) std::memcpy(m.buffer.data.get(), data, bytes);
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_) throw Aborted{};
  box_[static_cast<std::size_t>(dst) * n_ + src].push_back(std::move(m));
  posted_[static_cast<std::size_t>(dst) * n_ + src].fetch_add(1, std::memory_order_release);
  wake_[dst].notify_one();
}

void SimWorld::take(int dst, int src, Channel ch, void* data, std::size_t bytes) {
  const std::size_t at = static_cast<std::size_t>(dst) * n_ + src;
  std::unique_lock<std::mutex> lock(mu_);
  auto& box = box_[at];
  if (box.empty()) {
    // Poll for up to 50 us, giving the core away between looks, before sleeping on the condition.
    const std::size_t seen = taken_[at];
    lock.unlock();
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
    while (posted_[at].load(std::memory_order_acquire) == seen && std::chrono::steady_clock::now() < until)
      std::this_thread::yield();
    lock.lock();
  }
  waiting_on_[dst] = src;
  while (box.empty()) {
    if (aborted_) {
      waiting_on_[dst] = -1;
      throw Aborted{};
    }
    // Stop only once no live device can move on: a device still running may yet find the more
    // telling error (two calls that do not match); a wait on a finished device counts as stuck.
    std::string why;
    if (all_stuck_locked()) {
      for (int d = 0; d < n_ && why.empty(); ++d)
        if (!finished_[d] && waiting_on_[d] >= 0 && finished_[waiting_on_[d]])
          why = "device " + std::to_string(d) + " waits in " + activity_[d] + " for device " +
                std::to_string(waiting_on_[d]) + ", which finished its program without taking part";
      if (why.empty()) why = "collectives do not match, every device is stuck: " + stuck_report_locked();
    }
    if (!why.empty()) {
      waiting_on_[dst] = -1;
      abort_locked(std::make_exception_ptr(Error(ErrorKind::mismatch, why)));
      throw Aborted{};
    }
    wake_[dst].wait(lock);
  }
  waiting_on_[dst] = -1;
  Message m = std::move(box.front());
  box.pop_front();
  ++taken_[at];
  if (m.channel != ch || m.size != bytes) {
    std::string why = "collectives do not match: device " + std::to_string(dst) + " is in " + activity_[dst] +
                      " and expected " + std::to_string(bytes) + " bytes from device " + std::to_string(src) +
                      ", which is in " + m.activity + " and sent " + std::to_string(m.size) + " bytes";
    abort_locked(std::make_exception_ptr(Error(ErrorKind::mismatch, why)));
    throw Aborted{};
  }
  lock.unlock();
  if (bytes) std::memcpy(data, m.buffer.data.get(), bytes);
  lock.lock();
  spare_.push_back(std::move(m.buffer));
}

void SimWorld::set_activity(int device, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  activity_[device] = what;
}

void SimWorld::finish(int device) {
  std::lock_guard<std::mutex> lock(mu_);
  finished_[device] = true;
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

void SimWorld::abort_locked(std::exception_ptr error) {
  if (!first_error_) first_error_ = error;
  aborted_ = true;
  for (auto& w : wake_) w.notify_all();
}

// Every live device waits on a mailbox that is empty: no message can ever arrive.
bool SimWorld::all_stuck_locked() const {
  for (int d = 0; d < n_; ++d) {
    if (finished_[d]) continue;
    if (waiting_on_[d] < 0 || !box_[static_cast<std::size_t>(d) * n_ + waiting_on_[d]].empty()) return false;
  }
  return true;
}

std::string SimWorld::stuck_report_locked() const {
  std::string out;
  for (int d = 0; d < n_; ++d) {
    if (finished_[d]) continue;
    if (!out.empty()) out += "; ";
    out += "device " + std::to_string(d) + " in " + activity_[d];
    if (waiting_on_[d] >= 0) out += " waits for device " + std::to_string(waiting_on_[d]);
  }
  return out;
}

void SimTransport::set_activity(const std::string& what) {
  Transport::set_activity(what);
  world_.set_activity(device_, what);
}

void SimTransport::exchange(Channel ch, const Group& g, int to, const void* sbuf, std::size_t sbytes, int from,
                            void* rbuf, std::size_t rbytes) {
  // Sends are buffered, so posting first and then taking can never deadlock a ring.
  world_.post(device_, g.members[to], ch, sbuf, sbytes, activity());
  world_.take(device_, g.members[from], ch, rbuf, rbytes);
}

}  // namespace shardlab
