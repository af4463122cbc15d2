#include "collectives/exit_signals.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>

namespace shardlab {

namespace {
std::atomic<int> hand_fd{-1};
std::atomic<bool> handed{false};

void on_signal(int signo) {
  const int fd = hand_fd.load();
  if (fd >= 0 && !handed.exchange(true)) {
    const unsigned char s = static_cast<unsigned char>(signo);
    if (::write(fd, &s, 1) == 1) return;  // the reader ends the process
  }
  _exit(128 + signo);
}
}  // namespace

void exit_on_signals() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

void hand_signals_to(int fd) { hand_fd.store(fd); }

}  // namespace shardlab
