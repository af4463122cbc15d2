#include "core/trace.hpp"

#include <chrono>
#include <ctime>

namespace shardlab {

namespace {
thread_local std::vector<Span>* current = nullptr;
}

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

double trace_now_us() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

std::vector<Span>* trace_spans() { return current; }
void set_trace_spans(std::vector<Span>* spans) { current = spans; }

TraceSpan::~TraceSpan() {
  if (spans_) (*spans_)[index_].dur_us = trace_now_us() - (*spans_)[index_].start_us;
}

}  // namespace shardlab
