// shardlab::Error: the one exception type for bad input and broken setups.
// Its message is a sentence a learner can act on; binaries print it on stderr and exit 2 (3 for a
// runtime fault, ErrorKind::fault).
#pragma once
#include <stdexcept>
#include <string>

namespace shardlab {

enum class ErrorKind {
  parse,          // malformed text: mesh, spec, mapping, shape, flag value
  unknown_axis,   // a spec or mapping names an axis the mesh does not have
  duplicate_axis, // one mesh axis used twice in one spec
  not_divisible,  // a tensor dim does not split evenly over its mesh axes
  rank_mismatch,  // spec rank differs from tensor rank, or shapes disagree
  world_size,     // MPI world size differs from the mesh's device count
  mismatch,       // devices of one group called different collectives
  io,             // unreadable or unwritable file
  unsupported,    // a case the planner or runtime cannot handle
  device,         // a device's program failed; the message names the device
  fault,          // runtime fault: a device waited past --collective-timeout (exit status 3)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace shardlab
