// CallRecord: the bookkeeping around one collective call on one device. It checks that the whole
// group makes the same call, times it, and writes the ledger row from the transport's counters.
#pragma once
#include <chrono>
#include <string>

#include "collectives/device.hpp"
#include "collectives/ledger.hpp"

namespace shardlab {

class CallRecord {
 public:
  // `signature` describes the call in words ("all_gather over Y of A[4, 4] along dim 1"); every
  // member of the group must pass the same one. It becomes the device's activity; where the
  // transport does not compare activities on its data messages (MPI), the group first exchanges
  // signatures around its ring.
  CallRecord(Device& dev, const Group& group, const std::string& op, const std::string& tensor,
             const std::string& algorithm, std::size_t input_bytes, const std::string& signature);
  // A point-to-point call (op send or recv) to or from device `peer`: no group, no signatures to
  // compare; `input_bytes` is what a send hands over (0 for a receive).
  CallRecord(Device& dev, const std::string& op, int peer, const std::string& tensor, std::size_t input_bytes);
  // Writes the ledger row: bytes and messages from the transport's counters, or, for `modeled`
  // calls (the transport library's own collectives, whose traffic we cannot see), from the cost
  // model's prediction for this row's op, group, input and element size.
  void done(std::size_t output_bytes, bool modeled = false);
  // Uneven blocks: the bytes of each member's part (LedgerRow::part_bytes) and this device's place.
  void parts(std::vector<std::size_t> part_bytes, int member) {
    row_.part_bytes = std::move(part_bytes);
    row_.member = member;
  }

 private:
  Device& dev_;
  LedgerRow row_;
  TransportStats before_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace shardlab
