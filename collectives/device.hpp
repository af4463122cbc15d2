// Device: the handle a sharded program gets. Every device runs the same function with its own
// handle (SPMD); there is no global "current rank".
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "collectives/fault.hpp"
#include "collectives/ledger.hpp"
#include "collectives/transport.hpp"
#include "core/dtype.hpp"
#include "core/mesh.hpp"
#include "core/trace.hpp"

namespace shardlab {

class Device {
 public:
  // `dtype`: the element type this device's collectives move (and their ledger rows count).
  Device(int id, const Mesh& mesh, Transport& transport, bool native = false, DType dtype = DType::float64)
      : id_(id), mesh_(mesh), transport_(transport), native_(native), dtype_(dtype) {}

  int id() const { return id_; }
  const Mesh& mesh() const { return mesh_; }
  std::vector<int> coords() const { return mesh_.coords(id_); }
  int coord(const std::string& axis) const { return coords()[mesh_.axis(axis)]; }
  Group group(const std::vector<std::string>& axes) const;
  // The group a collective runs over: group(axes), except under --inject wrong-axis, where every
  // device's first collective over one axis that has a twin of the same size runs over the twin.
  Group collective_group(const std::vector<std::string>& axes);

  Transport& transport() { return transport_; }
  Ledger& ledger() { return ledger_; }
  const Ledger& ledger() const { return ledger_; }
  // --collectives native: use the transport's library collectives (MPI) where it has them.
  bool native() const { return native_; }
  DType dtype() const { return dtype_; }
  std::size_t element_bytes() const { return shardlab::element_bytes(dtype_); }
  // Scratch space of at least `bytes`, kept for the device's next call (slot 0 or 1): collectives
  // stage through it instead of mapping fresh pages each call. Not zero-filled.
  unsigned char* scratch(int slot, std::size_t bytes);
  // The compute spans of this device's program, when the run is traced (core/trace.hpp).
  std::vector<Span>& spans() { return spans_; }

  // --inject (collectives/fault.hpp): the fault planted in this run (the runtime sets it on every
  // device). strike(k): true once, on the mesh's last device, when the planted fault is of kind
  // k: the caller then plants it. struck(): it was planted here.
  void set_fault(const Fault& f) { fault_ = f; }
  const Fault& fault() const { return fault_; }
  bool strike(FaultKind k) {
    if (fault_.kind != k || struck_ || id_ != mesh_.devices() - 1) return false;
    return struck_ = true;
  }
  bool struck() const { return struck_; }
  // A replayed run (collectives/replay.hpp): the collectives compute their results from their
  // definitions instead of going round the ring, and plant no fault.
  void set_replaying(bool on) { replaying_ = on; }
  bool replaying() const { return replaying_; }

 private:
  int id_;
  const Mesh& mesh_;
  Transport& transport_;
  Ledger ledger_;
  std::vector<Span> spans_;
  bool native_;
  DType dtype_;
  Fault fault_;
  bool struck_ = false;
  bool replaying_ = false;
  bool axis_swapped_ = false;  // wrong-axis: every device swaps once, at the same call
  struct Scratch {
    std::unique_ptr<unsigned char[]> data;
    std::size_t size = 0;
  };
  Scratch scratch_[2];
};

}  // namespace shardlab
