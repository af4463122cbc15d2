// Collectives over a group of devices: those that differ only along the named mesh axes
// ("over Y" on X=2,Y=4 is 2 groups of 4). Each is written once over Transport::sendrecv.
//
//   all_gather      local [.., b, ..] -> [.., n*b, ..] along `dim`; block i from member i.  ring
//   reduce_scatter  local [.., n*b, ..] -> [.., b, ..]: member i keeps the sum of slice i.  ring
//   all_reduce      every member gets the elementwise sum = reduce_scatter + all_gather.   ring
//   all_reduce_max  the same with the elementwise largest in place of the sum (a max over a
//                   split dim); the same bytes and messages.                              ring
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

// T is what the program holds (double, float, bfloat16); the wire carries dev.dtype(), converting
// on the way in and out when the two differ (float64 lesson blocks moved as bfloat16, say), and the
// ledger counts wire bytes. Instantiated for double, float and bfloat16.
template <class T>
xt::xarray<T> all_gather(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                         std::size_t dim, const std::string& tensor);
template <class T>
xt::xarray<T> reduce_scatter(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                             std::size_t dim, const std::string& tensor);
template <class T>
xt::xarray<T> all_reduce(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                         const std::string& tensor);
template <class T>
xt::xarray<T> all_reduce_max(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                             const std::string& tensor);
template <class T>
xt::xarray<T> all_to_all(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                         std::size_t split_dim, std::size_t concat_dim, const std::string& tensor);

// Uneven blocks, MPI_Allgatherv-like: the caller names every member's rows along the
// dim, in group order; the ring moves exactly those rows and the ledger row lists each member's
// part (LedgerRow::part_bytes). Native MPI is not used for them.
//   all_gather_v      member i holds counts[i] rows along dim; all get their concatenation
//   reduce_scatter_v  the rows along dim are cut into parts of counts[i]; member i keeps sum i
//   all_to_all_v      split_dim cut into split_counts[j] rows for member j; member i holds
//                     concat_counts[i] rows of concat_dim; received parts concatenated in order
template <class T>
xt::xarray<T> all_gather_v(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                           std::size_t dim, const std::vector<std::size_t>& counts, const std::string& tensor);
template <class T>
xt::xarray<T> reduce_scatter_v(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                               std::size_t dim, const std::vector<std::size_t>& counts, const std::string& tensor);
template <class T>
xt::xarray<T> all_to_all_v(Device& dev, const xt::xarray<T>& local, const std::vector<std::string>& axes,
                           std::size_t split_dim, std::size_t concat_dim, const std::vector<std::size_t>& split_counts,
                           const std::vector<std::size_t>& concat_counts, const std::string& tensor);

// Point-to-point between two devices, as pipeline stages pass activations forward and gradients
// back: a ledger row on each side (op send with the bytes it sent, op recv with the bytes it took;
// peer: the other device). The wire carries dev.dtype(). send returns without waiting for the
// receiver; recv blocks for `from`'s next message and fails, naming both devices, if its size is
// not `shape`'s. A send nobody receives fails the run when the devices finish.
void send(Device& dev, const Tensor& block, int to, const std::string& tensor);
Tensor recv(Device& dev, int from, const Shape& shape, const std::string& tensor);

}  // namespace shardlab
