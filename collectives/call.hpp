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
  // member of the group must pass the same one.
  CallRecord(Device& dev, const Group& group, const std::string& op, const std::string& tensor,
             const std::string& algorithm, std::size_t input_bytes, const std::string& signature);
  // Writes the ledger row. `modeled_bytes_sent` > 0 marks a row whose bytes come from the cost model.
  void done(std::size_t output_bytes);
  void done_modeled(std::size_t output_bytes, std::size_t bytes_sent, std::size_t bytes_received,
                    std::size_t messages);

 private:
  Device& dev_;
  LedgerRow row_;
  TransportStats before_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace shardlab
