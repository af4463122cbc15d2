#include "harness/npy.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

#include <sys/stat.h>
#include <unistd.h>

#include <xtensor/xmath.hpp>
#include <xtensor/xnpy.hpp>

#include "core/error.hpp"

namespace shardlab {

namespace {
Error io(const std::string& path, const std::string& what) { return Error(ErrorKind::io, path + ": " + what); }
}  // namespace

NpyType parse_npy_type(const std::string& text) {
  if (text == "float64" || text == "f8") return NpyType::float64;
  if (text == "float32" || text == "f4") return NpyType::float32;
  throw Error(ErrorKind::parse, "dtype '" + text + "' is not supported; use float32 or float64");
}

NpyArray load_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw io(path, "cannot open the file for reading");
  std::stringstream bytes;
  bytes << in.rdbuf();
  const std::size_t total = bytes.str().size();
  // xnpy reads the header, then as many bytes as the header's shape asks for.
  xt::detail::npy_file file = [&] {
    try {
      return xt::detail::load_npy_file(bytes);
    } catch (const std::exception& e) {
      throw io(path, std::string("not a readable .npy file (") + e.what() + ")");
    }
  }();
  if (bytes.fail()) throw io(path, "is shorter than its header says; the file is truncated");
  if (static_cast<std::size_t>(bytes.tellg()) != total) throw io(path, "has bytes after the array's data");
  if (file.m_fortran_order)
    throw io(path, "is stored in Fortran order; save it in C order (numpy.ascontiguousarray)");
  NpyArray out;
  if (file.m_typestring == "<f8") {
    out.data = std::move(file).cast<double, xt::layout_type::row_major>();
    out.type = NpyType::float64;
  } else if (file.m_typestring == "<f4") {
    Tensor d = std::move(file).cast<float, xt::layout_type::row_major>();
    out.data = std::move(d);
    out.type = NpyType::float32;
  } else {
    throw io(path, "holds dtype '" + file.m_typestring + "'; shardlab reads float32 (<f4) or float64 (<f8)");
  }
  return out;
}

void check_writable(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) throw io(path, "its directory " + dir + " does not exist");
  if (!S_ISDIR(st.st_mode)) throw io(path, dir + " is not a directory");
  if (::access(dir.c_str(), W_OK) != 0) throw io(path, "its directory " + dir + " is not writable");
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) throw io(path, "is a directory, not a file name");
}

void save_npy(const std::string& path, const Tensor& data, NpyType type) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw io(path, "cannot open a file for writing in its directory");
    if (type == NpyType::float64) {
      xt::detail::dump_npy_stream(out, data);
    } else {
      const xt::xarray<float> f = xt::cast<float>(data);
      xt::detail::dump_npy_stream(out, f);
    }
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw io(path, "writing failed (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw io(path, "cannot replace the file with the new result");
  }
}

}  // namespace shardlab
