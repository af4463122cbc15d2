// The MPI side of the mpi backend that is not payload (payload: mpi_transport.hpp).
//
//   MpiProcess  one per process: MPI_Init (errors return, never abort), the harness communicator
//               (run control, results, exit-status agreement; never in the ledger), and the
//               per-group communicators of a mesh: one per set of mesh axes, all made with
//               MPI_Comm_create_group when a run starts, while every rank is known to be there
//               (mpi_world.cpp); at exit, the status agreement, the goodbyes and MPI_Finalize
//               (mpi_exit.cpp). Every blocking MPI call from MPI_Init to MPI_Finalize runs under
//               the watchdog, and a roll call before each names a rank that does not come.
// One run's waits and deadlock monitor: mpi_monitor.hpp; the collective timeout: mpi_watchdog.hpp.
//
// Tags on the harness communicator carry the run's epoch, so notes of a failed run never match a
// later one; after a failed run every group communicator is dropped and made anew.
#pragma once
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/mesh.hpp"

namespace shardlab {

// Throws Error(device) naming `what` when an MPI call did not return MPI_SUCCESS.
void mpi_check(int rc, const char* what);
// The largest tag MPI allows here (MPI_TAG_UB).
int mpi_tag_ub();

class MpiProcess {
 public:
  static MpiProcess& get();  // MPI_Init on first use
  int rank() const { return rank_; }
  int size() const { return size_; }
  bool launched() const { return launched_; }  // started by mpiexec (not a singleton)
  // More ranks on this host than cores: waits yield the core instead of spinning on it.
  bool crowded() const { return crowded_; }
  // Between polls of a wait, the spin-th: nothing at first, then a yield; with more ranks than
  // cores, a long wait sleeps 50 us a poll, so the ranks with work get the cores (a yield alone
  // hands the core to another waiting rank as often as to one with work).
  void idle(long spin) const;
  MPI_Comm harness() const { return harness_; }

  // comms(mesh)[mask]: this rank's communicator over the mesh axes whose bits are set in mask,
  // ranked row-major over those axes in mesh order. Collective over all ranks when not cached.
  const std::vector<MPI_Comm>& comms(const Mesh& mesh);
  // After a failed run: pending operations and messages may linger on the old communicators, so
  // they are dropped (the next run makes new ones) and UCX is asked not to list them at exit.
  void after_failure();
  int next_epoch() { return ++epoch_; }

  int agree(int status);  // largest status over ranks; a rank that already left counts as 2
  // At exit: a goodbye to rank 0 (which answers whoever still waits to agree or to start a run with
  // "rank 0 left", then answers every goodbye), so no message is left unmatched; then MPI_Finalize.
  void leave();
  // Rank 0, before a run: true when rank r has left (or is not where rank 0 is); consumes its note.
  bool left_early(int r);

  // Harness tags: a status to agree on, or a goodbye (kGoodbye in place of a status), and rank 0's
  // answer; the roll call before each group communicator is made, and the making itself. A run's
  // tags follow: kRunTags + (epoch mod the epochs tags can hold) * kRunKinds + kind.
  static constexpr int kTagAgree = 1, kTagAgreeReply = 2, kTagGroups = 3, kTagRollCall = 4, kRunTags = 16;
  static constexpr int kGoodbye = -1;
  enum RunKind { note = 0, result = 1, verdict = 2, enter = 3, go = 4, kRunKinds = 5 };
  int run_tag(int epoch, RunKind kind) const;

 private:
  MpiProcess();
  void start_mpi(int launcher_rank);  // MPI_Init and the harness communicator, under the watchdog
  void abort_on_signals();  // under mpiexec: SIGINT/SIGTERM end the job with MPI_Abort(128 + signal)
  std::vector<int> everyone() const;  // every rank, this one too
  std::vector<int> others() const;    // every rank but this one
  // Every member of a group says it is here before the group's communicator is made, so a member
  // that never comes is named (a wait past the collective timeout), not waited for inside MPICH.
  void roll_call(MPI_Comm comm, const std::vector<int>& members, const std::string& what);
  MPI_Comm make_comm(const Mesh& mesh, unsigned mask, MPI_Group world);
  void drop_comms();
  // The exit handshake: every rank but 0 says goodbye and waits for rank 0's answer; rank 0 answers
  // once every rank has said goodbye.
  void say_goodbye();
  void collect_goodbyes();
  void answer_while_leaving(int r, const MPI_Status& message);  // rank 0: a message from r at exit
  void finalize();  // MPI_Finalize under the watchdog

  int rank_ = 0, size_ = 1;
  bool launched_ = false, left_ = false, crowded_ = false;
  MPI_Comm harness_ = MPI_COMM_NULL;
  std::string comms_key_;
  std::vector<MPI_Comm> comms_;
  std::vector<bool> gone_;  // rank 0: ranks that left (they no longer agree)
  int epoch_ = 0;
};

}  // namespace shardlab
