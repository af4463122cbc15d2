// Compute spans for traces: while a device runs its program, its thread holds a list that the
// core operations (einsum, the elementwise, reduce and softmax ops) add a span to, one per call,
// nested as the calls nest. Outside a device (the unsharded reference, planning) the list is
// absent and a span costs one pointer test. harness/check/trace.hpp writes them out.
#pragma once
#include <string>
#include <vector>

namespace shardlab {

struct Span {
  std::string name;    // "einsum", "gelu", "sum"
  std::string detail;  // "ik,kj->ij [4, 8] x [8, 4]"
  double start_us = 0; // on the machine's monotonic clock (trace_now_us)
  double dur_us = 0;
};

// Microseconds on the monotonic clock every process of this machine shares.
double trace_now_us();
// The calling thread's CPU time in seconds: what it ran, which other jobs sharing the cores do not
// inflate (the wall clock does).
double thread_cpu_seconds();
// The calling thread's span list: set by the runtime around a device's program, else null.
std::vector<Span>* trace_spans();
void set_trace_spans(std::vector<Span>* spans);

// One span from construction to destruction; the detail is built only when a list is set.
class TraceSpan {
 public:
  template <class Detail>
  TraceSpan(const std::string& name, Detail&& detail) : spans_(trace_spans()) {
    if (!spans_) return;
    index_ = spans_->size();
    spans_->push_back(Span{name, detail(), trace_now_us(), 0});
  }
  explicit TraceSpan(const std::string& name) : TraceSpan(name, [] { return std::string(); }) {}
  ~TraceSpan();
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  std::vector<Span>* spans_;
  std::size_t index_ = 0;
};

}  // namespace shardlab
