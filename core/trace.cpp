#include "core/trace.hpp"

#include <chrono>

namespace shardlab {

namespace {
thread_local std::vector<Span>* current = nullptr;
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
