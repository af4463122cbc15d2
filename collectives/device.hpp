// Device: the handle a sharded program gets. Every device runs the same function with its own
// handle (SPMD); there is no global "current rank".
#pragma once
#include <string>
#include <vector>

#include "collectives/ledger.hpp"
#include "collectives/transport.hpp"
#include "core/mesh.hpp"

namespace shardlab {

class Device {
 public:
  Device(int id, const Mesh& mesh, Transport& transport, bool native = false)
      : id_(id), mesh_(mesh), transport_(transport), native_(native) {}

  int id() const { return id_; }
  const Mesh& mesh() const { return mesh_; }
  std::vector<int> coords() const { return mesh_.coords(id_); }
  int coord(const std::string& axis) const { return coords()[mesh_.axis(axis)]; }
  Group group(const std::vector<std::string>& axes) const;

  Transport& transport() { return transport_; }
  Ledger& ledger() { return ledger_; }
  const Ledger& ledger() const { return ledger_; }
  // --collectives native: use the transport's library collectives (MPI) where it has them.
  bool native() const { return native_; }

 private:
  int id_;
  const Mesh& mesh_;
  Transport& transport_;
  Ledger ledger_;
  bool native_;
};

}  // namespace shardlab
