#include "collectives/predict.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace shardlab {

std::size_t predicted_bytes_sent(const std::string& op, int group_size, std::size_t input_bytes,
                                 std::size_t element_bytes) {
  const std::size_t n = static_cast<std::size_t>(group_size);
  if (n <= 1) return 0;
  if (op == "send") return input_bytes;  // point-to-point: the whole block, once
  if (op == "recv") return 0;
  if (op == "collective_permute") return input_bytes;  // every member that moves sends its block
  if (op == "all_gather") return (n - 1) * input_bytes;
  if (op == "reduce_scatter" || op == "all_to_all") return (n - 1) * input_bytes / n;
  if (op == "all_reduce" || op == "all_reduce_max") {
    std::size_t most = 0;
    for (int r = 0; r < group_size; ++r)
      most = std::max(most, predicted_bytes_sent_by(op, group_size, input_bytes, element_bytes, r));
    return most;
  }
  throw Error(ErrorKind::unsupported, "no byte prediction for collective '" + op + "'");
}

std::size_t predicted_bytes_sent_v(const std::string& op, const std::vector<std::size_t>& part_bytes, int member) {
  const std::size_t n = part_bytes.size();
  if (n <= 1) return 0;
  std::size_t sum = 0;
  for (std::size_t b : part_bytes) sum += b;
  const std::size_t me = static_cast<std::size_t>(member) % n;
  if (op == "all_gather") return sum - part_bytes[(me + 1) % n];
  if (op == "reduce_scatter" || op == "all_to_all") return sum - part_bytes[me];
  throw Error(ErrorKind::unsupported, "no byte prediction for uneven parts of collective '" + op + "'");
}

std::size_t predicted_bytes_sent_by(const std::string& op, int group_size, std::size_t input_bytes,
                                    std::size_t element_bytes, int member) {
  if (group_size <= 1 || (op != "all_reduce" && op != "all_reduce_max"))
    return predicted_bytes_sent(op, group_size, input_bytes, element_bytes);
  const std::size_t n = static_cast<std::size_t>(group_size), e = input_bytes / element_bytes;
  auto chunk = [&](std::size_t r) { return e / n + (r < e % n ? 1 : 0); };
  const std::size_t r = static_cast<std::size_t>(member) % n;
  return (2 * e - chunk(r) - chunk((r + 1) % n)) * element_bytes;
}

std::size_t predicted_messages(const std::string& op, int group_size) {
  const std::size_t n = static_cast<std::size_t>(group_size);
  if (n <= 1) return 0;
  if (op == "send") return 1;
  if (op == "recv") return 0;
  if (op == "collective_permute") return 1;
  return op == "all_reduce" || op == "all_reduce_max" ? 2 * (n - 1) : n - 1;
}

}  // namespace shardlab
