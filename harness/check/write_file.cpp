#include "harness/check/write_file.hpp"

#include <cstdio>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.hpp"

namespace shardlab {

namespace {

Error io(const std::string& what, const std::string& path, const std::string& why) {
  return Error(ErrorKind::io, "cannot write " + what + " " + path + ": " + why);
}

}  // namespace

void check_writable(const std::string& path, const std::string& what) {
  const std::size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) throw io(what, path, "its directory " + dir + " does not exist");
  if (!S_ISDIR(st.st_mode)) throw io(what, path, dir + " is not a directory");
  if (::access(dir.c_str(), W_OK) != 0) throw io(what, path, "its directory " + dir + " is not writable");
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw io(what, path, "it is a directory, not a file name");
    if (!S_ISREG(st.st_mode)) throw io(what, path, "it exists and is not a regular file");
  }
}

void write_file_whole(const std::string& path, const std::string& what, const std::function<void(std::ostream&)>& fill) {
  check_writable(path, what);
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw io(what, path, "cannot create a file in its directory");
    fill(out);
    out.flush();
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      throw io(what, path, "writing failed (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw io(what, path, "cannot put the new file in its place");
  }
}

}  // namespace shardlab
