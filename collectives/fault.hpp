// Fault injection (--inject KIND): one planted bug in the sharded path, so that a verdict can be
// seen to fail and the harness's power to catch a wrong answer measured (shardlab power). The
// reference never runs through here: only what the devices compute or move is changed.
//
// A fault strikes once (wrong-axis aside), on the last device of the mesh, at the first place its kind applies:
//   perturb:E          one element of each of the device's returned blocks times (1 + E) (the
//                      element whose size is nearest the block's RMS)
//   skip-add           one ring sum step keeps what it received and skips adding its own part (a
//                      max is left alone: a softmax's subtracted max does not change its result)
//   gather-offset      two blocks of one all_gather land at each other's offsets
//   swap-blocks        in one all_to_all, the device's own block and the next member's are swapped
//   stale-receive      one all_gather ring step reuses the block the previous step received
//   skip-update        one optimizer step leaves the device's shard of the weights as they were
//   swap-microbatches  one micro-batch's backward reads another's stashed activations (a stash
//                      mix-up: where only one is stashed, as in 1F1B's steady state, it waits)
//   wrong-axis         every device's first collective over one mesh axis runs over another axis of
//                      the same size instead (planted on all devices, so the run still finishes)
// A kind with no place in a run (no all_to_all, no optimizer) never strikes; the run says so.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace shardlab {

enum class FaultKind {
  none, perturb, skip_add, gather_offset, swap_blocks, stale_receive, skip_update, swap_microbatches, wrong_axis
};

struct Fault {
  FaultKind kind = FaultKind::none;
  double size = 0;  // perturb's E
};

// "perturb:1e-3", "skip-add", ...; "" or "none" is no fault. Error(parse) naming the kinds.
Fault parse_fault(const std::string& text);
std::string fault_text(const Fault& f);  // as parse_fault reads it
// perturb:E below the element type's epsilon (2u: 2.2e-16, 1.2e-7, 7.8e-3) plants nothing: the
// element times (1 + E) rounds back to itself, and the run would PASS over no fault. Error(parse),
// one sentence naming the smallest E that shows; any other fault passes.
void refuse_unplantable(const Fault& f, DType t);
// Every kind, perturb with `e` ("perturb:0.001", "skip-add", ...).
std::vector<std::string> fault_kinds(double e);

// perturb:E on one block of n elements: the element whose size is nearest the block's RMS times
// (1 + E) (set to E where the block is all 0). T: double, float or bfloat16.
template <class T>
void perturb_block(T* data, std::size_t n, double e);
// Returned blocks that are bookkeeping, not results: names ending "_bytes", ZeRO's "held" counts,
// a pipeline stage's "order", "wall" and "peak_stash", a matmul's "flops" and "bytes_held", a padded
// program's "padding_dirty" flags.
// perturb:E leaves them alone.
bool is_bookkeeping(const std::string& name);

}  // namespace shardlab
