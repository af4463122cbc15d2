// Progress of a long run on stderr: which phase it is in, how far along, the time spent and an
// estimate of the time left, redrawn in place on one line about twice a second:
//     bench ffn: sharded run on 8 devices, 12 s, about 9 s left
// Only for people at a terminal: nothing unless stderr is a terminal, nothing under --json or
// --quiet, nothing in a phase's first second (short runs stay silent), and the line is cleared
// when its phase ends, so what the program prints next starts on a clean line. The environment
// variable SHARDLAB_PROGRESS=terminal behaves as on a terminal whatever stderr is, =always also
// draws every phase as it starts (scripts and tests: the line does not depend on speed), =never
// never draws.
// One display per process: the command that owns the run turns it on; any code may name phases.
#pragma once
#include <chrono>
#include <string>

namespace shardlab::progress {

// Turns the display on for this process, titled `title` (e.g. "bench ffn"), if `wanted` (the
// caller's !json && !quiet, and the printing rank under MPI) and stderr is a terminal.
void enable(const std::string& title, bool wanted);
bool enabled();
// Clears the drawn line now (before printing to the terminal); the next tick draws it again.
void clear();

// What the display shows of a phase.
struct Shown {
  bool active = false;
  std::string name;
  double expected = 0, total = 0, done = 0;
  std::chrono::steady_clock::time_point start;
};

// One phase of work, shown while the object lives; phases nest (the inner one is shown until it
// ends, then the outer one again). `expected_seconds` (> 0) gives the estimate of
// the time left; `total` (> 0) counts units done with advance(), and the estimate then follows the
// rate so far.
class Phase {
 public:
  explicit Phase(const std::string& name, double expected_seconds = 0, double total = 0);
  ~Phase();
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;
  void advance(double done);  // units done so far (of total)

 private:
  Shown outer_;  // the phase this one interrupts (a case file's run inside `check`): shown again when this ends
};

// The line as drawn for a phase `name` at `elapsed` seconds, with its expectation and units (the
// estimate: expected - elapsed, or elapsed x (total - done) / done): what the display shows.
std::string line(const std::string& title, const std::string& name, double elapsed, double expected_seconds,
                 double total, double done);

}  // namespace shardlab::progress
