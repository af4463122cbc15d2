// Loads the mpi backend's module (collectives/mpi_module.hpp) on the first mpi:: call and hands
// each call to it. The module sits beside the program's folder: <build>/bin/<program> loads
// <build>/lib/libshardlab_mpi.so, so a sanitizer build loads its own.
#include "collectives/mpi.hpp"

#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <mutex>

#include "collectives/mpi_module.hpp"
#include "core/error.hpp"

namespace shardlab::mpi {

namespace {

std::string module_path() {
  char exe[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  const std::string path = n > 0 ? std::string(exe, static_cast<std::size_t>(n)) : std::string();
  const std::size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? std::string(".") : path.substr(0, slash);  // <build>/bin
  return dir + "/../lib/libshardlab_mpi.so";
}

const mpi_module::Table& module() {
  static const mpi_module::Table* table = nullptr;
  static std::once_flag once;
  static std::string why;
  std::call_once(once, [] {
    const std::string path = module_path();
    // Global: MPICH finds UCX's functions by name (collectives/mpi_world.cpp).
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!handle) {
      const char* e = ::dlerror();
      why = "the mpi backend could not be loaded (" + std::string(e ? e : path) + "); run make to build it";
      return;
    }
    auto entry = reinterpret_cast<decltype(&shardlab_mpi_module)>(::dlsym(handle, "shardlab_mpi_module"));
    const mpi_module::Table* t = entry ? entry() : nullptr;
    if (!t || t->version != mpi_module::kTableVersion) {
      why = "the mpi backend's module " + path + " does not match this program; run make to rebuild both";
      return;
    }
    table = t;
  });
  if (!table) throw Error(ErrorKind::fault, why);
  return *table;
}

}  // namespace

void start() { module().start(); }
void stop() { module().stop(); }
bool is_root() { return module().is_root(); }
int rank() { return module().rank(); }
int world_size() { return module().world_size(); }
void check_world(const Mesh& mesh) { module().check_world(mesh); }
RunResult run(const Mesh& mesh, const SpmdProgram& program, bool native, DType dtype, bool trace, const Fault& fault) {
  return module().run(mesh, program, native, dtype, trace, fault);
}
int agree(int status) { return module().agree(status); }
std::string library_version() { return module().library_version(); }
std::unique_ptr<MpichCollectives> mpich_collectives(const Group& g) { return module().mpich_collectives(g); }

}  // namespace shardlab::mpi
