#include "harness/check/progress.hpp"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "core/text.hpp"

namespace shardlab::progress {

namespace {

using Clock = std::chrono::steady_clock;

// The display: one phase at a time, redrawn by a ticker thread while a phase lives.
struct Display {
  std::mutex mu;
  std::condition_variable wake;
  bool on = false, drawn = false, stop = false;
  bool from_start = false;  // SHARDLAB_PROGRESS=always: draw each phase as it starts (scripts, tests)
  std::string title;
  Shown phase;
  std::thread ticker;

  void draw_locked() {
    const double elapsed = std::chrono::duration<double>(Clock::now() - phase.start).count();
    if (elapsed < 1.0 && !from_start) return;  // short phases stay silent
    const std::string text = line(title, phase.name, elapsed, phase.expected, phase.total, phase.done);
    std::fprintf(stderr, "\r%s\033[K", text.c_str());
    std::fflush(stderr);
    drawn = true;
  }
  void clear_locked() {
    if (!drawn) return;
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    drawn = false;
  }
  void run() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stop) {
      wake.wait_for(lock, std::chrono::milliseconds(500));
      if (on && phase.active && !stop) draw_locked();
    }
  }
  ~Display() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    wake.notify_all();
    if (ticker.joinable()) ticker.join();
  }
};

Display& display() {
  static Display d;
  return d;
}

std::string seconds_text(double s) {
  if (s < 60) return format_number(s, "%.0f") + " s";
  return format_number(s / 60, "%.1f") + " min";
}

}  // namespace

void enable(const std::string& title, bool wanted) {
  const char* env = std::getenv("SHARDLAB_PROGRESS");
  const std::string mode = env ? env : "";
  bool on = wanted && (mode == "always" || mode == "terminal" || (mode != "never" && ::isatty(STDERR_FILENO)));
  Display& d = display();
  std::lock_guard<std::mutex> lock(d.mu);
  if (!on) d.clear_locked();
  d.title = title;
  d.on = on;
  d.from_start = mode == "always";
  if (on && !d.ticker.joinable()) d.ticker = std::thread([&d] { d.run(); });
}

bool enabled() {
  Display& d = display();
  std::lock_guard<std::mutex> lock(d.mu);
  return d.on;
}

void clear() {
  Display& d = display();
  std::lock_guard<std::mutex> lock(d.mu);
  d.clear_locked();
}

Phase::Phase(const std::string& name, double expected_seconds, double total) {
  Display& d = display();
  std::lock_guard<std::mutex> lock(d.mu);
  if (!d.on) return;
  d.clear_locked();
  outer_ = d.phase;
  d.phase = Shown{true, name, expected_seconds, total, 0, Clock::now()};
  if (d.from_start) d.draw_locked();
}

Phase::~Phase() {
  Display& d = display();
  std::lock_guard<std::mutex> lock(d.mu);
  if (!d.on) return;
  d.clear_locked();
  d.phase = outer_;
}

void Phase::advance(double done) {
  Display& d = display();
  std::lock_guard<std::mutex> lock(d.mu);
  d.phase.done = done;
}

std::string line(const std::string& title, const std::string& name, double elapsed, double expected_seconds,
                 double total, double done) {
  std::string out = title + ": " + name;
  if (total > 0) out += " " + format_number(done, "%.0f") + "/" + format_number(total, "%.0f");
  out += ", " + seconds_text(elapsed);
  double left = -1;
  if (total > 0 && done > 0) left = elapsed * (total - done) / done;
  else if (expected_seconds > 0) left = expected_seconds - elapsed;
  if (left > 0) out += ", about " + seconds_text(left) + " left";
  else if (expected_seconds > 0 && left <= 0) out += ", longer than expected";
  return out;
}

}  // namespace shardlab::progress
