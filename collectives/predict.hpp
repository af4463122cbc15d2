// Bytes each device sends in one collective, from the algorithm's arithmetic alone (not from
// running it). The harness compares these predictions with the ledger; native MPI rows use them
// as their (modeled) byte counts.
//
// A group of n devices; `input_bytes` is the local buffer handed to the collective.
//   all_gather      input is one block; sends n-1 blocks      = (n-1)/n of the gathered tensor
//   reduce_scatter  input is the full tensor; sends n-1 slices = (n-1)/n of the input
//   all_reduce      reduce_scatter then all_gather             = 2(n-1)/n of the input
//   all_reduce_max  the same, combining by max
//   all_to_all      keeps 1 of n slices, sends the others      = (n-1)/n of the input
// all_reduce splits a buffer of e elements into n near-equal chunks (the first e%n get one more);
// device r sends every chunk but r in the first half and every chunk but r+1 in the second, so
// the largest sender is given exactly; with e divisible by n it is 2(n-1)/n of the input.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace shardlab {

std::size_t predicted_bytes_sent(const std::string& op, int group_size, std::size_t input_bytes,
                                 std::size_t element_bytes);
std::size_t predicted_messages(const std::string& op, int group_size);
// What member `member` of the group sends: all_reduce's chunk arithmetic above for that member
// (the largest sender is what predicted_bytes_sent gives); every other op sends the same from each.
std::size_t predicted_bytes_sent_by(const std::string& op, int group_size, std::size_t input_bytes,
                                    std::size_t element_bytes, int member);

// Uneven parts (LedgerRow::part_bytes): `part_bytes[i]` of member i, this device is
// member `member`. Ring AllGather passes on every block but its successor's; ring ReduceScatter
// sends a partial sum of every slice but its own; AllToAll sends every part but its own:
//   all_gather      sum - part[member+1]      reduce_scatter, all_to_all   sum - part[member]
// With equal parts these are the formulas above.
std::size_t predicted_bytes_sent_v(const std::string& op, const std::vector<std::size_t>& part_bytes, int member);

}  // namespace shardlab
