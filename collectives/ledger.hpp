// The ledger: one row per device per collective call, filled from what the transport moved.
// The cost model predicts; the ledger measures; the harness compares the two.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace shardlab {

struct LedgerRow {
  int device = 0;
  int call = 0;               // 0, 1, 2 ... in the order this device called collectives
  std::string op;             // all_gather | reduce_scatter | all_reduce | all_reduce_max | all_to_all | send | recv
  std::string axes;           // "Y", "X,Y"
  std::string tensor;         // label given by the program, e.g. "A"
  std::string algorithm;      // ring | pairwise | native
  int group_size = 1;
  int peer = -1;              // send / recv: the other device; -1 for collectives
  std::size_t element_bytes = 8; // of the element type on the wire (core/dtype.hpp)
  std::size_t input_bytes = 0;   // the local buffer handed to the collective
  std::size_t output_bytes = 0;  // the local buffer it returned
  std::size_t messages = 0;      // payload messages sent
  std::size_t bytes_sent = 0, bytes_received = 0;
  double seconds = 0;
  double start_us = 0;   // when the call began, on the monotonic clock (core/trace.hpp)
  bool modeled = false;  // bytes from the cost model (native MPI collectives), not measured
  // Uneven blocks: the bytes of each member's part, in group order (all_gather: its
  // block; reduce_scatter: its slice of the sum; all_to_all: what this device sends it), and this
  // device's position in the group. Empty for calls whose parts are all equal.
  std::vector<std::size_t> part_bytes;
  int member = -1;
};

class Ledger {
 public:
  void add(LedgerRow row);  // stamps row.call
  const std::vector<LedgerRow>& rows() const { return rows_; }
  void clear() { rows_.clear(); }

 private:
  std::vector<LedgerRow> rows_;
};

// Point-to-point rows that do not pair up: for each sender and receiver, the k-th send must meet
// the k-th receive with the same bytes. Returns "" when they do, else one sentence naming both
// devices (a send nobody received, or a receive of another size).
std::string unmatched_messages(const std::vector<LedgerRow>& rows);

// Line-based text form, for shipping rows between processes.
std::string serialize(const std::vector<LedgerRow>& rows);
std::vector<LedgerRow> deserialize(const std::string& text);

}  // namespace shardlab
