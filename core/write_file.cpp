#include "core/write_file.hpp"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.hpp"

namespace shardlab {

namespace {

Error io(const std::string& what, const std::string& path, const std::string& why) {
  return Error(ErrorKind::io, "cannot write " + what + " " + path + ": " + why);
}

}  // namespace

namespace {
// The file a path writes to: a symbolic link's target (write_file_whole replaces it and keeps the
// link), else the path itself. A link to nothing is refused: it is not clear what to write.
std::string written_path(const std::string& given, const std::string& what) {
  struct stat lst {};
  if (::lstat(given.c_str(), &lst) != 0 || !S_ISLNK(lst.st_mode)) return given;
  char* real = ::realpath(given.c_str(), nullptr);
  if (!real) throw io(what, given, "it is a symbolic link to nothing (a dangling link)");
  const std::string out = real;
  std::free(real);
  return out;
}
}  // namespace

void check_writable(const std::string& given, const std::string& what) {
  const std::string path = written_path(given, what);
  const std::size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty()) throw io(what, path, "it names a directory, not a file");
  // The temporary file beside it adds ".tmp" and the process id (up to 11 bytes).
  if (name.size() + 11 > NAME_MAX || path.size() + 11 >= PATH_MAX)
    throw io(what, path.substr(0, 60) + "...", "the name is longer than the file system allows (" +
                                                   std::to_string(NAME_MAX) + " bytes a name)");
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) throw io(what, path, "its directory " + dir + " does not exist");
  if (!S_ISDIR(st.st_mode)) throw io(what, path, dir + " is not a directory");
  if (::access(dir.c_str(), W_OK) != 0) throw io(what, path, "its directory " + dir + " is not writable");
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw io(what, path, "it is a directory, not a file name");
    if (!S_ISREG(st.st_mode)) throw io(what, path, "it exists and is not a regular file");
    // A read-only file is kept, for root too (whose access() ignores the mode bits), and so is an
    // immutable one (chattr +i), which the rename at the end would fail on after all the work.
    const bool no_write_bit = (st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0;
    if (no_write_bit || ::access(path.c_str(), W_OK) != 0)
      throw io(what, path, std::string("it exists and is read-only") + (!no_write_bit && errno == EPERM ? " (immutable)" : "") +
                               "; make it writable or give another name");
  }
  // A writable directory that takes no files (/proc, /sys, a read-only mount, as root): try the
  // temporary file the write will use, and remove it, so the run does not find out after its work.
  const std::string probe = path + ".tmp" + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) {
    if (errno != EEXIST) throw io(what, path, "cannot create a file in its directory");
  } else {
    ::close(fd);
    ::unlink(probe.c_str());
  }
}

namespace {
// What a path names, to compare two paths: "inode:<dev>:<ino>" for an existing file, else the
// absolute path of its (resolved) directory and its name.
std::string identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return "inode:" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  const std::size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  char* real = ::realpath(dir.c_str(), nullptr);
  const std::string base = real ? real : dir;
  std::free(real);
  return base + "/" + (slash == std::string::npos ? path : path.substr(slash + 1));
}
}  // namespace

void refuse_shared_paths(const std::vector<std::pair<std::string, std::string>>& outputs,
                         const std::vector<std::pair<std::string, std::string>>& inputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].second.empty()) continue;
    const std::string mine = identity(outputs[i].second);
    const auto clash = [&](const std::pair<std::string, std::string>& other, const std::string& hint) {
      if (!other.second.empty() && identity(other.second) == mine)
        throw Error(ErrorKind::io, outputs[i].first + " and " + other.first + " name the same file " +
                                       outputs[i].second + "; " + hint);
    };
    for (std::size_t j = i + 1; j < outputs.size(); ++j) clash(outputs[j], "give each output its own file");
    for (const auto& in : inputs) clash(in, "writing it would destroy the input");
  }
}

void write_file_whole(const std::string& path_given, const std::string& what, const std::function<void(std::ostream&)>& fill) {
  check_writable(path_given, what);
  // Through a symbolic link to a regular file: replace the file it names, keep the link.
  const std::string path = written_path(path_given, what);
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
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw io(what, path, "cannot put the new file in its place (" + why + ")");
  }
}

}  // namespace shardlab
