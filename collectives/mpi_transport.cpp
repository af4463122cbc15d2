#include "collectives/mpi_transport.hpp"

#include <algorithm>
#include <climits>
#include <cstring>

#include "core/error.hpp"

namespace shardlab {

namespace {
// MPI counts are int; larger buffers would need MPI-4 large counts, which nothing here needs yet.
int mpi_count(std::size_t n, const char* what) {
  if (n > static_cast<std::size_t>(INT_MAX))
    throw Error(ErrorKind::unsupported, std::string(what) + " of " + std::to_string(n) +
                                            " elements is more than one MPI message can carry here");
  return static_cast<int>(n);
}

// Block i of `from` goes to block perm[i] of `to` (blocks of `each` doubles).
void permute_blocks(const double* from, double* to, const std::vector<int>& perm, std::size_t each) {
  for (std::size_t i = 0; i < perm.size(); ++i) std::copy(from + i * each, from + (i + 1) * each, to + perm[i] * each);
}
void unpermute_blocks(const double* from, double* to, const std::vector<int>& perm, std::size_t each) {
  for (std::size_t i = 0; i < perm.size(); ++i) std::copy(from + perm[i] * each, from + (perm[i] + 1) * each, to + i * each);
}
}  // namespace

const MpiTransport::GroupComm& MpiTransport::comm_for(const Group& g) {
  auto it = cache_.find(g.axes);
  if (it != cache_.end()) return it->second;
  unsigned mask = 0;
  for (const auto& a : g.axes) mask |= 1u << mesh_.axis(a);
  std::vector<std::string> mesh_order;  // the communicator ranks its members row-major in mesh order
  for (int a = 0; a < mesh_.rank(); ++a)
    if (mask >> a & 1u) mesh_order.push_back(mesh_.names()[a]);
  GroupComm gc;
  gc.comm = comms_.at(mask);
  for (int p = 0; p < g.size(); ++p) {
    gc.rank_of.push_back(mesh_.index_along(g.members[p], mesh_order));
    gc.identity = gc.identity && gc.rank_of.back() == p;
  }
  return cache_.emplace(g.axes, gc).first->second;
}

void MpiTransport::exchange(Channel ch, const Group& g, int to, const void* sbuf, std::size_t sbytes, int from,
                            void* rbuf, std::size_t rbytes) {
  const GroupComm& gc = comm_for(g);
  const int tag = run_.group_tag(static_cast<int>(ch));
  MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  MPI_Status st[2];
  try {
    // The receive is posted first so that the peer's message lands in place.
    mpi_check(MPI_Irecv(rbuf, mpi_count(rbytes, "a receive"), MPI_BYTE, gc.rank_of[from], tag, gc.comm, &req[1]),
              "MPI_Irecv");
    mpi_check(MPI_Isend(sbuf, mpi_count(sbytes, "a send"), MPI_BYTE, gc.rank_of[to], tag, gc.comm, &req[0]),
              "MPI_Isend");
    run_.wait(2, req, st, g.members[from], activity());
  } catch (...) {
    MpiRun::cancel_requests(2, req);
    throw;
  }
  int got = 0;
  MPI_Get_count(&st[1], MPI_BYTE, &got);
  if (static_cast<std::size_t>(got) != rbytes)
    throw Error(ErrorKind::mismatch, "collectives do not match: device " + std::to_string(device_) + " is in " +
                                         activity() + " and expected " + std::to_string(rbytes) +
                                         " bytes from device " + std::to_string(g.members[from]) + ", which sent " +
                                         std::to_string(got) + " bytes");
}

namespace {
constexpr std::size_t kSegment = std::size_t{1} << 17;  // doubles: 1 MiB
std::size_t segments(std::size_t count) { return std::max<std::size_t>(1, (count + kSegment - 1) / kSegment); }
}  // namespace

void MpiTransport::exchange_add(const Group& g, int to, const double* sbuf, std::size_t scount, int from,
                                double* acc, std::size_t rcount) {
  const GroupComm& gc = comm_for(g);
  const int tag = run_.group_tag(static_cast<int>(Channel::data));
  const std::size_t rsegs = segments(rcount), ssegs = segments(scount);
  incoming_.resize(rcount);
  // requests: [0, rsegs) receives, then the sends
  std::vector<MPI_Request> req(rsegs + ssegs, MPI_REQUEST_NULL);
  std::vector<MPI_Status> st(rsegs);
  auto piece = [](std::size_t count, std::size_t k) { return std::min(kSegment, count - k * kSegment); };
  try {
    for (std::size_t k = 0; k < rsegs; ++k)
      mpi_check(MPI_Irecv(incoming_.data() + k * kSegment, mpi_count(piece(rcount, k), "a receive"), MPI_DOUBLE,
                          gc.rank_of[from], tag, gc.comm, &req[k]),
                "MPI_Irecv");
    for (std::size_t k = 0; k < ssegs; ++k)
      mpi_check(MPI_Isend(sbuf + k * kSegment, mpi_count(piece(scount, k), "a send"), MPI_DOUBLE, gc.rank_of[to],
                          tag, gc.comm, &req[rsegs + k]),
                "MPI_Isend");
    for (std::size_t k = 0; k < rsegs; ++k) {
      run_.wait(1, &req[k], &st[k], g.members[from], activity());
      int got = 0;
      MPI_Get_count(&st[k], MPI_DOUBLE, &got);
      if (static_cast<std::size_t>(got) != piece(rcount, k))
        throw Error(ErrorKind::mismatch, "collectives do not match: device " + std::to_string(device_) + " is in " +
                                             activity() + " and got a message of the wrong size from device " +
                                             std::to_string(g.members[from]));
      double* a = acc + k * kSegment;
      const double* in = incoming_.data() + k * kSegment;
      for (std::size_t i = 0, len = piece(rcount, k); i < len; ++i) a[i] += in[i];
    }
    run_.wait(static_cast<int>(ssegs), &req[rsegs], MPI_STATUSES_IGNORE, g.members[to], activity());
  } catch (...) {
    MpiRun::cancel_requests(static_cast<int>(req.size()), req.data());
    throw;
  }
}

void MpiTransport::meet(const Group& g, const GroupComm& gc) {
  if (g.size() == 1) return;
  // If a member never arrives the barrier stays pending; the run then fails and drops the comms.
  MPI_Request r = MPI_REQUEST_NULL;
  mpi_check(MPI_Ibarrier(gc.comm, &r), "MPI_Ibarrier");
  run_.wait(1, &r, MPI_STATUSES_IGNORE, g.members[g.prev()], activity());
}

bool MpiTransport::native_all_reduce(const Group& g, double* buf, std::size_t n) {
  const GroupComm& gc = comm_for(g);
  meet(g, gc);
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, buf, mpi_count(n, "MPI_Allreduce"), MPI_DOUBLE, MPI_SUM, gc.comm),
            "MPI_Allreduce");
  return true;
}

bool MpiTransport::native_all_gather(const Group& g, const double* in, std::size_t n, double* out) {
  const GroupComm& gc = comm_for(g);
  const int count = mpi_count(n, "MPI_Allgather");
  mpi_count(n * g.size(), "MPI_Allgather");
  meet(g, gc);
  if (gc.identity) {
    mpi_check(MPI_Allgather(in, count, MPI_DOUBLE, out, count, MPI_DOUBLE, gc.comm), "MPI_Allgather");
    return true;
  }
  std::vector<double> tmp(n * g.size());  // communicator order
  mpi_check(MPI_Allgather(in, count, MPI_DOUBLE, tmp.data(), count, MPI_DOUBLE, gc.comm), "MPI_Allgather");
  unpermute_blocks(tmp.data(), out, gc.rank_of, n);
  return true;
}

bool MpiTransport::native_reduce_scatter(const Group& g, const double* in, std::size_t n_each, double* out) {
  const GroupComm& gc = comm_for(g);
  const int count = mpi_count(n_each, "MPI_Reduce_scatter_block");
  mpi_count(n_each * g.size(), "MPI_Reduce_scatter_block");
  meet(g, gc);
  if (gc.identity) {
    mpi_check(MPI_Reduce_scatter_block(in, out, count, MPI_DOUBLE, MPI_SUM, gc.comm), "MPI_Reduce_scatter_block");
    return true;
  }
  std::vector<double> tmp(n_each * g.size());
  permute_blocks(in, tmp.data(), gc.rank_of, n_each);
  mpi_check(MPI_Reduce_scatter_block(tmp.data(), out, count, MPI_DOUBLE, MPI_SUM, gc.comm),
            "MPI_Reduce_scatter_block");
  return true;
}

bool MpiTransport::native_all_to_all(const Group& g, const double* in, std::size_t n_each, double* out) {
  const GroupComm& gc = comm_for(g);
  const int count = mpi_count(n_each, "MPI_Alltoall");
  mpi_count(n_each * g.size(), "MPI_Alltoall");
  meet(g, gc);
  if (gc.identity) {
    mpi_check(MPI_Alltoall(in, count, MPI_DOUBLE, out, count, MPI_DOUBLE, gc.comm), "MPI_Alltoall");
    return true;
  }
  std::vector<double> send(n_each * g.size()), recv(n_each * g.size());
  permute_blocks(in, send.data(), gc.rank_of, n_each);
  mpi_check(MPI_Alltoall(send.data(), count, MPI_DOUBLE, recv.data(), count, MPI_DOUBLE, gc.comm), "MPI_Alltoall");
  unpermute_blocks(recv.data(), out, gc.rank_of, n_each);
  return true;
}

}  // namespace shardlab
