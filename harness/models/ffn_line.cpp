#include "harness/models/ffn_line.hpp"

#include <utility>
#include <vector>

#include "collectives/runtime.hpp"
#include "core/error.hpp"
#include "core/text.hpp"

namespace shardlab {

namespace {

std::size_t gcd(std::size_t a, std::size_t b) { return b == 0 ? a : gcd(b, a % b); }

// `mesh_typed`: "--mesh ..." or "mpiexec -n ...", empty for the default mesh; `dims_typed` the same
// for --dims.
void refuse_bad_line(const Mesh& mesh, const FfnDims& d, const std::string& mesh_typed, const std::string& dims_typed,
                     bool from_processes, const std::string& who) {
  const std::size_t n = static_cast<std::size_t>(mesh.devices()), both = gcd(d.m, d.h);
  // A line that cuts M and H evenly, to suggest: the shortest with at least this many devices, or
  // failing that the longest with fewer.
  std::size_t fits = 1;
  for (std::size_t k = 1; k <= both; ++k)
    if (both % k == 0 && (fits < n || k == n)) fits = k;
  const std::string line = (from_processes ? "mpiexec -n " : "--mesh Y=") + std::to_string(fits);
  if (mesh.rank() != 1)
    throw Error(ErrorKind::parse, mesh_typed + " has " + std::to_string(mesh.rank()) +
                                      " axes; " + who + " cuts weights over one line of devices: try " + line);
  if ((d.m % n == 0 && d.h % n == 0) || mesh.uneven() != Uneven::none) return;  // --uneven chunk|pad: any sizes
  const auto up = [n](std::size_t v) { return std::to_string((v + n - 1) / n * n); };
  std::vector<std::string> bad;
  std::string dims_fix;
  for (const auto& [name, v] : {std::pair<std::string, std::size_t>{"M", d.m}, {"H", d.h}})
    if (v % n != 0) {
      bad.push_back(name + "=" + std::to_string(v));
      dims_fix += (dims_fix.empty() ? "" : ",") + name + "=" + up(v);
    }
  const std::string slices = std::to_string(n) + " equal slices, one per device";
  if (mesh_typed.empty())
    throw Error(ErrorKind::not_divisible, dims_typed + ": " + join(bad, " and ") + (bad.size() > 1 ? " do" : " does") +
                                              " not split into " + slices + " of mesh " + mesh.text() + "; try " + dims_fix);
  throw Error(ErrorKind::not_divisible, mesh_typed + " cannot split " + join(bad, " or ") + " into " + slices + "; try " +
                                            (fits > 1 ? line : dims_fix));
}

}  // namespace

void refuse_bad_ffn_line(const CommonOptions& common, const std::string& default_mesh, const std::string& dims_flag,
                         const std::string& default_dims, const std::string& who) {
  const FfnDims dims = parse_ffn_dims(dims_flag);
  const int procs = common.backend == "mpi" ? launched_processes() : 0;
  const bool from_procs = procs > 0 && common.mesh == "Y=" + std::to_string(procs);
  Mesh mesh = Mesh::parse(common.mesh);
  mesh.set_uneven(parse_uneven(common.uneven));
  refuse_bad_line(mesh, dims,
                  from_procs ? "mpiexec -n " + std::to_string(procs)
                  : common.mesh == default_mesh ? std::string() : "--mesh " + common.mesh,
                  dims_flag == default_dims ? std::string() : "--dims " + dims_flag, from_procs, who);
}

}  // namespace shardlab
