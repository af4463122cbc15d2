// Writing a result file whole or not at all: the bytes go to a temporary file beside `path`, which
// is then renamed over it, so a reader never sees half a file and a failed write leaves the old
// one as it was. A path that exists and is not a regular file (a directory, /dev/full, a FIFO) is
// refused first: renaming over it would put a regular file in its place.
#pragma once
#include <functional>
#include <iosfwd>
#include <string>

namespace shardlab {

// Error(io) "cannot write <what> <path>: <why>" when the directory is missing or not writable, or
// the path exists and is not a regular file. Creates nothing.
void check_writable(const std::string& path, const std::string& what);
// check_writable, then `fill` writes the content to a stream; Error(io) if writing fails.
void write_file_whole(const std::string& path, const std::string& what, const std::function<void(std::ostream&)>& fill);

}  // namespace shardlab
