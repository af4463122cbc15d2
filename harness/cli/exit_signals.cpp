#include "harness/cli/exit_signals.hpp"

#include <signal.h>
#include <unistd.h>

namespace shardlab {

namespace {
void exit_now(int signo) { _exit(128 + signo); }
}  // namespace

void exit_on_signals() {
  struct sigaction action {};
  action.sa_handler = exit_now;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

}  // namespace shardlab
