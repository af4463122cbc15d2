// Named arrays in and out of a run: a .npz (NumPy's np.savez: a zip of NAME.npy entries, stored or
// deflated) or a folder of NAME.npy files, read entry by entry through harness/check/npy.hpp's
// checks. The zip container is libzip's (Debian's libzip-dev): a maintained reader of stored,
// deflated and zip64 archives that checks every entry's CRC, so a truncated or corrupt archive is
// refused instead of read short. Every failure is Error(io), one sentence naming the file.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "harness/check/npy.hpp"

namespace shardlab {

struct NamedArrays {
  std::string source;                     // the .npz or the folder, as given
  std::map<std::string, NpyArray> arrays; // NAME (an entry "ref/y.npy" is "ref/y") -> its values
  // Where NAME was read, for messages: "w.npz:x.npy" or "dir/x.npy".
  std::string where(const std::string& name) const;
};

// A .npz file, or a folder (its NAME.npy files; other files are left alone). Error(io) for a
// path that is neither, an archive libzip cannot read, an entry that is not NAME.npy, any entry
// npy.hpp refuses, or a folder holding no .npy file.
NamedArrays load_arrays(const std::string& path);

// Writes `arrays` as a .npz numpy.load reads (entries NAME.npy, stored, float64: every value of
// a run exactly), whole or not at all (core/write_file.hpp). Names must be unique and non-empty.
void save_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& arrays);

}  // namespace shardlab
