#include "collectives/watchdog.hpp"

#include <atomic>
#include <cmath>
#include <cstdio>

#include "core/error.hpp"

namespace shardlab {

namespace {
std::atomic<double> timeout_seconds{kDefaultCollectiveTimeout};
}

double collective_timeout() { return timeout_seconds.load(std::memory_order_relaxed); }

void set_collective_timeout(double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds))
    throw Error(ErrorKind::parse, "the collective timeout must be a positive number of seconds, not " +
                                      std::to_string(seconds));
  timeout_seconds.store(seconds, std::memory_order_relaxed);
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g s", seconds);
  return text;
}

Deadline::Deadline(double seconds) : start_(std::chrono::steady_clock::now()) {
  // Up to a year: a huge --collective-timeout must not overflow the clock.
  const double s = std::fmin(seconds, 365.0 * 24 * 3600);
  at_ = start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

double Deadline::waited() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

}  // namespace shardlab
