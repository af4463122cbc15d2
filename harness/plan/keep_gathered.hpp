// keep_gathered: a case's forward pass gathers activations (sequence parallelism
// all-gathers the layer-normed input before each block) and, by default, its backward pass gathers
// them again, as Megatron does: a layer's backward runs long after its forward, and holding every
// layer's gathered copies costs memory. keep_gathered = true keeps the forward's copies for the
// backward einsums that start from them instead. The trade-off (the scaling book's, "store or
// re-gather"), from the two plans of one case:
//   saved  = bytes sent per device re-gathering - bytes sent keeping
//   held   = the kept copies' bytes per device, held from the forward einsum that moved each to
//            the last backward einsum that reads it (for a copy gathered whole over t devices,
//            t times its stored block: b*s*m*e for a layer's [b,s,m] input, e bytes an element)
//   peak   = the most bytes a device holds at once, each way (program_plan.hpp's count)
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "harness/plan/program_plan.hpp"

namespace shardlab {

struct KeptCopy {
  std::string tensor;         // the tensor the forward einsum moved (x, not x_t, for a rename)
  Spec spec;                  // as the copy lies
  std::size_t bytes = 0;      // per device
  std::size_t moved_by = 0;   // the forward op that moved it (an index into ops)
  std::size_t last_use = 0;   // the last backward op that starts from it
};

// The forward's copies that `plan`'s backward einsums start from (none unless plan.keep_gathered).
std::vector<KeptCopy> copies_kept_for_backward(const ProgramPlan& plan);

struct KeepTradeOff {
  std::size_t bytes_regather = 0, bytes_keep = 0;  // sent per device, whole run
  std::size_t peak_regather = 0, peak_keep = 0;    // held per device at most
  std::vector<KeptCopy> copies;                    // what keeping holds
  std::size_t held() const;                        // the copies' bytes
  long saved() const { return long(bytes_regather) - long(bytes_keep); }
};

// `regather` and `keep`: one case planned with keep_gathered false and true.
KeepTradeOff keep_trade_off(const ProgramPlan& regather, const ProgramPlan& keep);

// A few lines for `shardlab run`: what keeping costs beside what it saves, and which way the case
// runs (`kept`). Empty when the backward gathers nothing the forward had gathered.
std::string keep_gathered_text(const KeepTradeOff& t, bool kept);

}  // namespace shardlab
