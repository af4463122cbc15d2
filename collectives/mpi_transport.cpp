#include "collectives/mpi_transport.hpp"

#include "collectives/stop_point.hpp"

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

// Block i of `from` goes to block perm[i] of `to` (blocks of `each` bytes).
void permute_blocks(const void* from_, void* to_, const std::vector<int>& perm, std::size_t each) {
  auto from = static_cast<const unsigned char*>(from_);
  auto to = static_cast<unsigned char*>(to_);
  for (std::size_t i = 0; i < perm.size(); ++i) std::copy(from + i * each, from + (i + 1) * each, to + perm[i] * each);
}
void unpermute_blocks(const void* from_, void* to_, const std::vector<int>& perm, std::size_t each) {
  auto from = static_cast<const unsigned char*>(from_);
  auto to = static_cast<unsigned char*>(to_);
  for (std::size_t i = 0; i < perm.size(); ++i) std::copy(from + perm[i] * each, from + (perm[i] + 1) * each, to + i * each);
}

// MPICH 4.0 has no bfloat16 type: its elements move as MPI_UINT16_T and sum through a user op
// that adds in float32 and rounds back, as the ring's own reduction does.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) { add_into(DType::bfloat16, inout, in, *len); }
void bf16_max(void* in, void* inout, int* len, MPI_Datatype*) {
  combine_elements(DType::bfloat16, Reduce::max, inout, inout, in, static_cast<std::size_t>(*len));
}
}  // namespace

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::float32: return MPI_FLOAT;
    case DType::float64: return MPI_DOUBLE;
    case DType::bfloat16: return MPI_UINT16_T;
  }
  return MPI_BYTE;
}

MPI_Op mpi_sum(DType t) {
  if (t != DType::bfloat16) return MPI_SUM;
  static MPI_Op op = MPI_OP_NULL;  // created once, on the first bfloat16 reduction (after MPI_Init)
  if (op == MPI_OP_NULL) mpi_check(MPI_Op_create(&bf16_sum, 1, &op), "MPI_Op_create");
  return op;
}

MPI_Op mpi_max(DType t) {
  if (t != DType::bfloat16) return MPI_MAX;
  static MPI_Op op = MPI_OP_NULL;
  if (op == MPI_OP_NULL) mpi_check(MPI_Op_create(&bf16_max, 1, &op), "MPI_Op_create");
  return op;
}

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
  stop_point("collective", device_);  // testing: stopped mid-run
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

void MpiTransport::exchange_add(const Group& g, int to, const void* sbuf_, std::size_t scount, int from,
                                const void* base_, void* out_, std::size_t rcount, DType t, Reduce op) {
  const GroupComm& gc = comm_for(g);
  const int tag = run_.group_tag(static_cast<int>(Channel::data));
  const std::size_t eb = element_bytes(t), kSegment = (std::size_t{1} << 20) / eb;  // elements: 1 MiB
  auto segments = [&](std::size_t count) { return std::max<std::size_t>(1, (count + kSegment - 1) / kSegment); };
  const std::size_t rsegs = segments(rcount), ssegs = segments(scount);
  auto incoming = static_cast<unsigned char*>(this->incoming(rcount * eb));
  auto sbuf = static_cast<const unsigned char*>(sbuf_);
  auto base = static_cast<const unsigned char*>(base_);
  auto out = static_cast<unsigned char*>(out_);
  // requests: [0, rsegs) receives, then the sends
  std::vector<MPI_Request> req(rsegs + ssegs, MPI_REQUEST_NULL);
  std::vector<MPI_Status> st(rsegs);
  auto piece = [kSegment](std::size_t count, std::size_t k) { return std::min(kSegment, count - k * kSegment); };
  try {
    for (std::size_t k = 0; k < rsegs; ++k)
      mpi_check(MPI_Irecv(incoming + k * kSegment * eb, mpi_count(piece(rcount, k), "a receive"), mpi_type(t),
                          gc.rank_of[from], tag, gc.comm, &req[k]),
                "MPI_Irecv");
    for (std::size_t k = 0; k < ssegs; ++k)
      mpi_check(MPI_Isend(sbuf + k * kSegment * eb, mpi_count(piece(scount, k), "a send"), mpi_type(t),
                          gc.rank_of[to], tag, gc.comm, &req[rsegs + k]),
                "MPI_Isend");
    for (std::size_t k = 0; k < rsegs; ++k) {
      run_.wait(1, &req[k], &st[k], g.members[from], activity());
      int got = 0;
      MPI_Get_count(&st[k], mpi_type(t), &got);
      if (static_cast<std::size_t>(got) != piece(rcount, k))
        throw Error(ErrorKind::mismatch, "collectives do not match: device " + std::to_string(device_) + " is in " +
                                             activity() + " and got a message of the wrong size from device " +
                                             std::to_string(g.members[from]));
      const std::size_t at = k * kSegment * eb;
      combine_elements(t, op, out + at, base + at, incoming + at, piece(rcount, k));
    }
    run_.wait(static_cast<int>(ssegs), &req[rsegs], MPI_STATUSES_IGNORE, g.members[to], activity());
  } catch (...) {
    MpiRun::cancel_requests(static_cast<int>(req.size()), req.data());
    throw;
  }
}

const MpiTransport::GroupComm& MpiTransport::all_devices() {
  Group g;
  g.axes = mesh_.names();
  for (int d = 0; d < mesh_.devices(); ++d) g.members.push_back(d);  // row-major: position = device id
  g.me = device_;
  return comm_for(g);
}

void MpiTransport::p2p_send(int to, const void* buf, std::size_t bytes) {
  complete_sends(false);
  const GroupComm& gc = all_devices();
  auto p = std::make_unique<PendingSend>();
  p->copy.assign(static_cast<const char*>(buf), static_cast<const char*>(buf) + bytes);
  p->to = to;
  p->activity = activity();
  mpi_check(MPI_Isend(p->copy.data(), mpi_count(bytes, "a send"), MPI_BYTE, gc.rank_of[to],
                      run_.group_tag(static_cast<int>(Channel::p2p)), gc.comm, &p->request),
            "MPI_Isend");
  pending_.push_back(std::move(p));
}

void MpiTransport::p2p_recv(int from, void* buf, std::size_t bytes) {
  complete_sends(false);
  const GroupComm& gc = all_devices();
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Status st;
  try {
    mpi_check(MPI_Irecv(buf, mpi_count(bytes, "a receive"), MPI_BYTE, gc.rank_of[from],
                        run_.group_tag(static_cast<int>(Channel::p2p)), gc.comm, &req),
              "MPI_Irecv");
    run_.wait(1, &req, &st, from, activity());
  } catch (...) {
    MpiRun::cancel_requests(1, &req);
    throw;
  }
  int got = 0;
  MPI_Get_count(&st, MPI_BYTE, &got);
  if (static_cast<std::size_t>(got) != bytes)
    throw Error(ErrorKind::mismatch, "messages do not match: device " + std::to_string(device_) + " is in " +
                                         activity() + " and expected " + std::to_string(bytes) + " bytes from device " +
                                         std::to_string(from) + ", which sent " + std::to_string(got) + " bytes");
}

void MpiTransport::complete_sends(bool wait) {
  for (auto& p : pending_) {
    if (wait) {
      try {
        run_.wait(1, &p->request, MPI_STATUSES_IGNORE, p->to, p->activity);
      } catch (...) {
        for (auto& q : pending_) MpiRun::cancel_requests(1, &q->request);
        pending_.clear();
        throw;
      }
    } else {
      int done = 0;
      MPI_Test(&p->request, &done, MPI_STATUS_IGNORE);
      if (!done) continue;
    }
    p.reset();
  }
  pending_.erase(std::remove(pending_.begin(), pending_.end(), nullptr), pending_.end());
}

void MpiTransport::finish_sends() { complete_sends(true); }

MpiTransport::~MpiTransport() {
  for (auto& p : pending_)
    if (p) MpiRun::cancel_requests(1, &p->request);
}

void MpiTransport::meet(const Group& g, const GroupComm& gc) {
  if (g.size() == 1) return;
  // If a member never arrives the barrier stays pending; the run then fails and drops the comms.
  MPI_Request r = MPI_REQUEST_NULL;
  mpi_check(MPI_Ibarrier(gc.comm, &r), "MPI_Ibarrier");
  run_.wait(1, &r, MPI_STATUSES_IGNORE, g.members[g.prev()], activity());
}

void MpiTransport::finish_native(const Group& g, MPI_Request& r) {
  // A member that stops inside the collective would leave a blocking call hanging; this wait has
  // the collective timeout (and, like every wait, stops when another rank fails).
  // After a throw the request stays pending (MPI forbids cancelling or freeing a collective's);
  // the failed run's communicators are dropped.
  run_.wait(1, &r, MPI_STATUSES_IGNORE, g.members[g.prev()], activity());
}

bool MpiTransport::native_all_reduce(const Group& g, DType t, void* buf, std::size_t n, Reduce op) {
  const GroupComm& gc = comm_for(g);
  meet(g, gc);
  MPI_Request r = MPI_REQUEST_NULL;
  mpi_check(MPI_Iallreduce(MPI_IN_PLACE, buf, mpi_count(n, "MPI_Allreduce"), mpi_type(t),
                           op == Reduce::max ? mpi_max(t) : mpi_sum(t), gc.comm, &r),
            "MPI_Iallreduce");
  finish_native(g, r);
  return true;
}

bool MpiTransport::native_all_gather(const Group& g, DType t, const void* in, std::size_t n, void* out) {
  const GroupComm& gc = comm_for(g);
  const int count = mpi_count(n, "MPI_Allgather");
  mpi_count(n * g.size(), "MPI_Allgather");
  meet(g, gc);
  if (gc.identity) {
    MPI_Request r = MPI_REQUEST_NULL;
    mpi_check(MPI_Iallgather(in, count, mpi_type(t), out, count, mpi_type(t), gc.comm, &r), "MPI_Iallgather");
    finish_native(g, r);
    return true;
  }
  const std::size_t each = n * element_bytes(t);
  std::vector<unsigned char> tmp(each * g.size());  // communicator order
  MPI_Request r = MPI_REQUEST_NULL;
  mpi_check(MPI_Iallgather(in, count, mpi_type(t), tmp.data(), count, mpi_type(t), gc.comm, &r), "MPI_Iallgather");
  finish_native(g, r);
  unpermute_blocks(tmp.data(), out, gc.rank_of, each);
  return true;
}

bool MpiTransport::native_reduce_scatter(const Group& g, DType t, const void* in, std::size_t n_each, void* out) {
  const GroupComm& gc = comm_for(g);
  const int count = mpi_count(n_each, "MPI_Reduce_scatter_block");
  mpi_count(n_each * g.size(), "MPI_Reduce_scatter_block");
  meet(g, gc);
  if (gc.identity) {
    MPI_Request r = MPI_REQUEST_NULL;
    mpi_check(MPI_Ireduce_scatter_block(in, out, count, mpi_type(t), mpi_sum(t), gc.comm, &r),
              "MPI_Ireduce_scatter_block");
    finish_native(g, r);
    return true;
  }
  const std::size_t each = n_each * element_bytes(t);
  std::vector<unsigned char> tmp(each * g.size());
  permute_blocks(in, tmp.data(), gc.rank_of, each);
  MPI_Request r = MPI_REQUEST_NULL;
  mpi_check(MPI_Ireduce_scatter_block(tmp.data(), out, count, mpi_type(t), mpi_sum(t), gc.comm, &r),
            "MPI_Ireduce_scatter_block");
  finish_native(g, r);
  return true;
}

bool MpiTransport::native_all_to_all(const Group& g, DType t, const void* in, std::size_t n_each, void* out) {
  const GroupComm& gc = comm_for(g);
  const int count = mpi_count(n_each, "MPI_Alltoall");
  mpi_count(n_each * g.size(), "MPI_Alltoall");
  meet(g, gc);
  if (gc.identity) {
    MPI_Request r = MPI_REQUEST_NULL;
    mpi_check(MPI_Ialltoall(in, count, mpi_type(t), out, count, mpi_type(t), gc.comm, &r), "MPI_Ialltoall");
    finish_native(g, r);
    return true;
  }
  const std::size_t each = n_each * element_bytes(t);
  std::vector<unsigned char> send(each * g.size()), recv(each * g.size());
  permute_blocks(in, send.data(), gc.rank_of, each);
  MPI_Request r = MPI_REQUEST_NULL;
  mpi_check(MPI_Ialltoall(send.data(), count, mpi_type(t), recv.data(), count, mpi_type(t), gc.comm, &r),
            "MPI_Ialltoall");
  finish_native(g, r);
  unpermute_blocks(recv.data(), out, gc.rank_of, each);
  return true;
}

}  // namespace shardlab
