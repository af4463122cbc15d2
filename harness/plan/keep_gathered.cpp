#include "harness/plan/keep_gathered.hpp"

#include <map>

#include "core/layout.hpp"

namespace shardlab {

std::vector<KeptCopy> copies_kept_for_backward(const ProgramPlan& plan) {
  std::map<std::pair<std::size_t, int>, KeptCopy> found;  // (op, operand) of the forward einsum
  const std::size_t eb = element_bytes(plan.dtype);
  for (std::size_t j = 0; j < plan.ops.size(); ++j) {
    if (j < plan.backward_from) continue;
    const OpPlan& o = plan.ops[j];
    for (int k = 0; k < 2; ++k) {
      if (!o.reuse[k] || o.reuse_op[k] >= plan.backward_from) continue;
      const OpPlan& by = plan.ops[o.reuse_op[k]];
      const int operand = o.reuse_operand[k];
      KeptCopy& c = found[{o.reuse_op[k], operand}];
      c.tensor = plan.program.ops[by.op].in[static_cast<std::size_t>(operand)];
      c.spec = operand == 0 ? by.contraction.a_used : by.contraction.b_used;
      c.bytes = element_count(local_shape(plan.mesh, c.spec, plan.program.shape(c.tensor))) * eb;
      c.moved_by = o.reuse_op[k];
      c.last_use = j;
    }
  }
  std::vector<KeptCopy> out;
  for (auto& kv : found) out.push_back(kv.second);
  return out;
}

std::size_t KeepTradeOff::held() const {
  std::size_t n = 0;
  for (const auto& c : copies) n += c.bytes;
  return n;
}

KeepTradeOff keep_trade_off(const ProgramPlan& regather, const ProgramPlan& keep) {
  KeepTradeOff t;
  t.bytes_regather = regather.predicted_bytes_per_device();
  t.bytes_keep = keep.predicted_bytes_per_device();
  t.peak_regather = predicted_peak_bytes(regather);
  t.peak_keep = predicted_peak_bytes(keep);
  t.copies = copies_kept_for_backward(keep);
  return t;
}

std::string keep_gathered_text(const KeepTradeOff& t, bool kept) {
  if (t.copies.empty()) return "";
  const long peak = long(t.peak_keep) - long(t.peak_regather);
  std::string out = std::string("Gathered activations, keep_gathered = ") +
                    (kept ? "true (kept for the backward pass):\n"
                          : "false (gathered again for the backward pass, as Megatron does):\n");
  out += "  keeping " + std::string(kept ? "saves " : "would save ") + std::to_string(t.saved()) +
         " B sent per device (" + std::to_string(t.bytes_regather) + " -> " + std::to_string(t.bytes_keep) +
         " B) and " + (kept ? "costs " : "cost ") + std::to_string(t.held()) + " B held per device\n";
  out += "  peak held per device " + std::to_string(t.peak_regather) + " -> " + std::to_string(t.peak_keep) + " B (" +
         (peak >= 0 ? "+" : "") + std::to_string(peak) + "); the copies:\n";
  for (const auto& c : t.copies)
    out += "    " + c.tensor + " " + c.spec.text() + ", " + std::to_string(c.bytes) + " B: moved by op " +
           std::to_string(c.moved_by + 1) + ", last read by op " + std::to_string(c.last_use + 1) + "\n";
  return out;
}

}  // namespace shardlab
