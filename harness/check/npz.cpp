#include "harness/check/npz.hpp"

#include <zip.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/write_file.hpp"

namespace shardlab {

namespace {

namespace fs = std::filesystem;

Error npz_error(const std::string& path, const std::string& what) { return Error(ErrorKind::io, path + ": " + what); }

std::string libzip_text(int code) {
  zip_error_t e;
  zip_error_init_with_code(&e, code);
  std::string text = zip_error_strerror(&e);
  zip_error_fini(&e);
  return text;
}

// Entries "NAME.npy", as np.savez writes them; NAME may hold '/' (a folder inside the archive).
std::string entry_name(const std::string& path, const std::string& entry) {
  const std::string ext = ".npy";
  if (entry.size() <= ext.size() || entry.compare(entry.size() - ext.size(), ext.size(), ext) != 0)
    throw npz_error(path, "holds an entry '" + entry + "', not NAME.npy; a .npz made by numpy.savez holds only .npy entries");
  return entry.substr(0, entry.size() - ext.size());
}

void read_npz(const std::string& path, NamedArrays& out) {
  int code = 0;
  std::unique_ptr<zip_t, void (*)(zip_t*)> z(zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code), zip_discard);
  if (!z) throw npz_error(path, "not a readable .npz file (" + libzip_text(code) + ")");
  const zip_int64_t n = zip_get_num_entries(z.get(), 0);
  if (n <= 0) throw npz_error(path, "holds no arrays");
  for (zip_uint64_t i = 0; i < static_cast<zip_uint64_t>(n); ++i) {
    zip_stat_t st;
    if (zip_stat_index(z.get(), i, 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) || !(st.valid & ZIP_STAT_SIZE))
      throw npz_error(path, "entry " + std::to_string(i + 1) + " cannot be read (" + zip_strerror(z.get()) + ")");
    const std::string entry = st.name, name = entry_name(path, entry);
    if (out.arrays.count(name)) throw npz_error(path, "holds " + entry + " twice");
    const std::string where = path + ":" + entry;
    std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> f(zip_fopen_index(z.get(), i, 0), zip_fclose);
    if (!f) throw npz_error(where, "cannot be opened (" + std::string(zip_strerror(z.get())) + ")");
    out.arrays[name] = read_npy(where, st.size, [&](char* into, std::uint64_t bytes) {
      while (bytes > 0) {
        const zip_int64_t got = zip_fread(f.get(), into, bytes);
        if (got <= 0)
          throw npz_error(where, got < 0 ? "cannot be read (" + std::string(zip_file_strerror(f.get())) + "); the archive is corrupt"
                                  : "ends before its stated size; the archive is truncated");
        into += got;
        bytes -= static_cast<std::uint64_t>(got);
      }
    });
    // The CRC is checked when the entry has been read to its end: read past it once.
    char extra;
    if (zip_fread(f.get(), &extra, 1) != 0)
      throw npz_error(where, "fails its checksum or holds more than its stated size (" + std::string(zip_file_strerror(f.get())) +
                          "); the archive is corrupt");
  }
}

}  // namespace

std::string NamedArrays::where(const std::string& name) const {
  std::error_code ec;
  return fs::is_directory(source, ec) ? (fs::path(source) / (name + ".npy")).string() : source + ":" + name + ".npy";
}

NamedArrays load_arrays(const std::string& path) {
  NamedArrays out;
  out.source = path;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) throw npz_error(path, "no such file or folder (give a .npz file or a folder of NAME.npy files)");
  if (fs::is_directory(status)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.path().extension() == ".npy" && e.is_regular_file()) files.push_back(e.path());
    if (ec) throw npz_error(path, "cannot list the folder (" + ec.message() + ")");
    if (files.empty()) throw npz_error(path, "holds no NAME.npy file");
    std::sort(files.begin(), files.end());
    for (const auto& f : files) out.arrays[f.stem().string()] = load_npy(f.string());
    return out;
  }
  if (!fs::is_regular_file(status)) throw npz_error(path, "is not a regular file or a folder");
  read_npz(path, out);
  return out;
}

void save_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& arrays) {
  std::set<std::string> seen;
  std::vector<std::string> files;  // each entry's bytes, held until the archive is closed
  for (const auto& [name, data] : arrays) {
    if (name.empty() || !seen.insert(name).second)
      throw Error(ErrorKind::parse, "save_npz: the name '" + name + "' is empty or given twice");
    std::ostringstream npy;
    write_npy(npy, data, NpyType::float64);
    files.push_back(npy.str());
  }
  // The archive is built in memory, then written whole by write_file_whole (libzip's own
  // zip_close would rename its temporary file over whatever `path` is, /dev/full included).
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* buffer = zip_source_buffer_create(nullptr, 0, 0, &error);
  if (!buffer) throw Error(ErrorKind::fault, "libzip: " + std::string(zip_error_strerror(&error)));
  zip_source_keep(buffer);
  std::unique_ptr<zip_source_t, void (*)(zip_source_t*)> hold(buffer, zip_source_free);
  zip_t* z = zip_open_from_source(buffer, ZIP_TRUNCATE, &error);
  if (!z) throw Error(ErrorKind::fault, "libzip: " + std::string(zip_error_strerror(&error)));
  const auto fail = [&](const std::string& what) {
    const std::string text = "libzip: " + what + ": " + zip_strerror(z);
    zip_discard(z);
    return Error(ErrorKind::fault, text);
  };
  for (std::size_t i = 0; i < files.size(); ++i) {
    zip_source_t* s = zip_source_buffer(z, files[i].data(), files[i].size(), 0);
    if (!s) throw fail("adding " + arrays[i].first);
    const zip_int64_t at = zip_file_add(z, (arrays[i].first + ".npy").c_str(), s, ZIP_FL_ENC_UTF_8);
    if (at < 0) {
      zip_source_free(s);
      throw fail("adding " + arrays[i].first);
    }
    zip_set_file_compression(z, static_cast<zip_uint64_t>(at), ZIP_CM_STORE, 0);
  }
  if (zip_close(z) != 0) throw fail("closing the archive");
  std::string bytes;
  if (zip_source_open(buffer) != 0 || zip_source_seek(buffer, 0, SEEK_END) != 0)
    throw Error(ErrorKind::fault, "libzip: cannot read back the archive built in memory");
  bytes.resize(static_cast<std::size_t>(zip_source_tell(buffer)));
  zip_source_seek(buffer, 0, SEEK_SET);
  if (zip_source_read(buffer, bytes.data(), bytes.size()) != static_cast<zip_int64_t>(bytes.size()))
    throw Error(ErrorKind::fault, "libzip: cannot read back the archive built in memory");
  zip_source_close(buffer);
  write_file_whole(path, "the .npz file", [&](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
}

}  // namespace shardlab
