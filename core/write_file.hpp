// Writing a result file whole or not at all: the bytes go to a temporary file beside `path`, which
// is then renamed over it, so a reader never sees half a file and a failed write leaves the old
// one as it was. A path that exists and is not a regular file (a directory, /dev/full, a FIFO) is
// refused first: renaming over it would put a regular file in its place.
#pragma once
#include <functional>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

namespace shardlab {

// Error(io) "cannot write <what> <path>: <why>" when the directory is missing or not writable, or
// the path exists and is not a regular file, or is read-only (no write bit, even for root) or
// immutable. Creates nothing and leaves the target as it was.
void check_writable(const std::string& path, const std::string& what);
// Error(io) when two of the named files are one: an output given twice, or an output on top of an
// input ("--trace and --a-in name the same file x.npy"). Each entry is {flag, path}; empty paths are
// skipped. Existing files compare by device and inode (links included), new ones by absolute path.
void refuse_shared_paths(const std::vector<std::pair<std::string, std::string>>& outputs,
                         const std::vector<std::pair<std::string, std::string>>& inputs);
// check_writable, then `fill` writes the content to a stream; Error(io) if writing fails. A
// symbolic link to a regular file is written through: the file it names is replaced, the link stays.
void write_file_whole(const std::string& path, const std::string& what, const std::function<void(std::ostream&)>& fill);

}  // namespace shardlab
