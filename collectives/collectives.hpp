// Collectives over a group of devices: those that differ only along the named mesh axes
// ("over Y" on X=2,Y=4 is 2 groups of 4). Each is written once over Transport::sendrecv.
//
//   all_gather      local [.., b, ..] -> [.., n*b, ..] along `dim`; block i from member i.  ring
//   reduce_scatter  local [.., n*b, ..] -> [.., b, ..]: member i keeps the sum of slice i.  ring
//   all_reduce      every member gets the elementwise sum = reduce_scatter + all_gather.   ring
//   all_to_all      slice i along split_dim goes to member i; received slices are
//                   concatenated along concat_dim in member order.                       pairwise
//
// Every call appends a row to dev.ledger() with the bytes the transport moved. Before moving data
// the group compares call signatures; a mismatch stops the run with an error naming both calls.
#pragma once
#include <string>
#include <vector>

#include "collectives/device.hpp"
#include "core/tensor.hpp"

namespace shardlab {

Tensor all_gather(Device& dev, const Tensor& local, const std::vector<std::string>& axes, std::size_t dim,
                  const std::string& tensor);
Tensor reduce_scatter(Device& dev, const Tensor& local, const std::vector<std::string>& axes, std::size_t dim,
                      const std::string& tensor);
Tensor all_reduce(Device& dev, const Tensor& local, const std::vector<std::string>& axes, const std::string& tensor);
Tensor all_to_all(Device& dev, const Tensor& local, const std::vector<std::string>& axes, std::size_t split_dim,
                  std::size_t concat_dim, const std::string& tensor);

}  // namespace shardlab
