#include "harness/check/npy.hpp"
#include "core/write_file.hpp"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <ostream>
#include <limits>
#include <sstream>


#include <xtensor/xmath.hpp>
#include <xtensor/xnpy.hpp>

#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/text.hpp"

namespace shardlab {

namespace {
Error io(const std::string& path, const std::string& what) { return Error(ErrorKind::io, path + ": " + what); }

const char* const kNoBfloat16 = "numpy has no bfloat16 type, but float32 holds every bfloat16 value exactly";

// The 'descr' value in a .npy header, or "" when the bytes are not a header xnpy could parse (it
// then reports what is wrong). Read before xnpy, whose own check rejects descrs such as '<V2' (a
// bfloat16 array saved through ml_dtypes) with only "invalid typestring".
std::string descr_of(const std::string& bytes) {
  if (bytes.compare(0, 6, "\x93NUMPY") != 0 || bytes.size() < 12) return "";
  const auto byte = [&](std::size_t i) { return static_cast<std::size_t>(static_cast<unsigned char>(bytes[i])); };
  const bool v1 = bytes[6] == 1;  // version 1 has a 2-byte header length, later ones 4 bytes
  const std::size_t start = v1 ? 10 : 12;
  const std::size_t length = v1 ? byte(8) | byte(9) << 8 : byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24;
  const std::string header = bytes.substr(start, length);
  std::size_t at = header.find("'descr'");
  if (at == std::string::npos || (at = header.find(':', at)) == std::string::npos) return "";
  at = header.find_first_not_of(' ', at + 1);
  if (at == std::string::npos || (header[at] != '\'' && header[at] != '"')) return "";
  const std::size_t end = header.find(header[at], at + 1);
  return end == std::string::npos ? "" : header.substr(at + 1, end - at - 1);
}

// bfloat16 as ml_dtypes (and so JAX) saves it: numpy has no bfloat16, and np.save writes an
// ml_dtypes array's dtype.str, the 2-byte void '<V2' ('|V2' from a plain void view of the bits).
// Each 2-byte word is the upper half of a float32, little-endian.
// 'bfloat16' is read too: the header ml_dtypes' users write by hand from str(dtype) to keep the type.
bool is_bfloat16_descr(const std::string& d) { return d == "<V2" || d == "|V2" || d == "bfloat16"; }
bool readable_descr(const std::string& d) { return d == "<f2" || d == "<f4" || d == "<f8" || is_bfloat16_descr(d); }
const char* const kReadable = "little-endian float16 (<f2), float32 (<f4), float64 (<f8) or bfloat16 (<V2, as ml_dtypes and "
                              "JAX save it)";
}  // namespace

NpyType parse_npy_type(const std::string& text) {
  if (text == "float64" || text == "f8") return NpyType::float64;
  if (text == "float32" || text == "f4") return NpyType::float32;
  if (text == "float16" || text == "f2") return NpyType::float16;
  if (text == "bfloat16") throw Error(ErrorKind::parse, "--out-dtype bfloat16: " + std::string(kNoBfloat16) + ", so use --out-dtype float32");
  throw Error(ErrorKind::parse, "dtype '" + text + "' is not supported; use float16, float32 or float64 (or f2, f4, f8)");
}

std::string npy_type_name(NpyType t) {
  return t == NpyType::float16 ? "float16" : t == NpyType::bfloat16 ? "bfloat16" : t == NpyType::float32 ? "float32" : "float64";
}

std::uint16_t to_half(double v) {
  std::uint64_t u;
  std::memcpy(&u, &v, sizeof u);
  const auto sign = static_cast<std::uint16_t>((u >> 48) & 0x8000);
  const std::uint64_t mag = u & 0x7fffffffffffffffull;
  if (mag > 0x7ff0000000000000ull) return sign | 0x7e00;  // NaN: a quiet NaN (the payload is not kept)
  const int exp = static_cast<int>(mag >> 52) - 1023;       // v = 1.f * 2^exp (zero, subnormals: -1023)
  if (exp >= 16) return sign | 0x7c00;                       // 2^16 and up, inf: inf
  if (exp < -25) return sign;                                // under half the smallest subnormal 2^-24: zero
  const std::uint64_t sig = (mag & ((1ull << 52) - 1)) | (1ull << 52);  // v = sig * 2^(exp-52)
  // The half's last place is 2^(exp-10) for normals, 2^-24 below 2^-14 (subnormals); count v in
  // those places, rounding the bits below to nearest, ties to even.
  const int shift = (exp < -14 ? -24 : exp - 10) - (exp - 52);
  std::uint64_t q = sig >> shift;
  const std::uint64_t rest = sig & ((1ull << shift) - 1), tie = 1ull << (shift - 1);
  if (rest > tie || (rest == tie && (q & 1))) ++q;
  // Subnormal: q is the fraction field (q = 1024 is the smallest normal, which has the same bits).
  // Normal: q in [1024, 2048]; a carry to 2048 moves to the next exponent, or to inf past 65504.
  if (exp < -14) return sign | static_cast<std::uint16_t>(q);
  return sign | static_cast<std::uint16_t>(((exp + 15) << 10) + (q - 1024));
}

double from_half(std::uint16_t bits) {
  const int e = (bits >> 10) & 0x1f, f = bits & 0x3ff;
  const double mag = e == 0    ? std::ldexp(f, -24)  // subnormal: f * 2^-24
                     : e == 31 ? (f == 0 ? HUGE_VAL : std::numeric_limits<double>::quiet_NaN())
                               : std::ldexp(f + 1024, e - 25);  // 1.f * 2^(e-15)
  return bits & 0x8000 ? -mag : mag;
}

namespace {
// Reads only the header (at most 1 MiB of the file) and checks its shape against the file's size
// before anything the shape asks for is allocated: a zero dim, a shape whose byte count overflows,
// or data shorter or longer than the shape is refused here.
struct Header {
  std::vector<std::size_t> shape;
  std::string typestr;
  bool fortran = false;
  std::uint64_t data_start = 0, elements = 1, item = 8;
  bool bfloat16 = false;  // '<V2' words, read as '<f2' by xnpy's parser
};

// The text of `key`'s value in a header dict: a quoted string with its quotes, a (tuple), or a
// word (True); "" when the key is not there.
std::string header_value(const std::string& header, const std::string& key) {
  std::size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) at = header.find("\"" + key + "\"");
  if (at == std::string::npos || (at = header.find(':', at)) == std::string::npos) return "";
  at = header.find_first_not_of(' ', at + 1);
  if (at == std::string::npos) return "";
  const char open = header[at];
  const std::size_t end = open == '(' ? header.find(')', at) : open == '\'' || open == '"' ? header.find(open, at + 1)
                                                                                          : header.find_first_of(",}", at) - 1;
  return end == std::string::npos || end < at ? "" : header.substr(at, end - at + 1);
}

// NumPy's format fixes neither the order of the header's keys nor a trailing comma; xnpy's parser
// wants 'descr', 'fortran_order', 'shape' in that order. The same dict in that order, or the
// header as it is when a key is missing (xnpy then says what is wrong).
std::string canonical_header(const std::string& header) {
  const std::string descr = header_value(header, "descr"), order = header_value(header, "fortran_order"),
                    shape = header_value(header, "shape");
  if (descr.empty() || order.empty() || shape.empty() || header.empty() || header.back() != '\n') return header;
  return "{'descr': " + descr + ", 'fortran_order': " + order + ", 'shape': " + shape + ", }\n";
}

Header check_header(const std::string& path, const std::string& head, std::uint64_t size) {
  std::string descr = descr_of(head);
  if (descr.find('\0') != std::string::npos) descr.clear();  // refused below, as any NUL in the header
  if (!descr.empty() && !readable_descr(descr))
    throw io(path, "holds dtype '" + descr + "'; shardlab reads " + kReadable);
  const auto unreadable = [&](const std::string& why) { return io(path, "not a readable .npy file (" + why + ")"); };
  // The preamble read here, as unsigned bytes: xnpy's own reader takes the header length from
  // signed chars (a byte of 0x80 or more turns it into about 4 GiB) and allocates it first.
  if (head.size() < 10 || head.compare(0, 6, "\x93NUMPY") != 0) throw unreadable("it does not start with \\x93NUMPY");
  const auto byte = [&](std::size_t i) { return static_cast<std::uint64_t>(static_cast<unsigned char>(head[i])); };
  const std::uint64_t major = byte(6);
  if (major != 1 && major != 2) throw unreadable("format version " + std::to_string(major) + " is not 1 or 2");
  const std::uint64_t start = major == 1 ? 10 : 12;
  if (head.size() < start) throw unreadable("the header is cut short");
  const std::uint64_t length = major == 1 ? byte(8) | byte(9) << 8 : byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24;
  if (start + length > head.size())
    throw unreadable("its header says " + std::to_string(length) + " bytes, more than the file" +
                     (head.size() < size ? "'s first MiB" : "") + " holds");
  std::string header = head.substr(start, length);
  // NumPy reads the header with ast.literal_eval, which refuses a NUL byte anywhere in it.
  if (header.find('\0') != std::string::npos) throw unreadable("its header holds a NUL byte, which NumPy refuses too");
  Header h;
  h.bfloat16 = is_bfloat16_descr(descr);
  if (h.bfloat16) header.replace(header.find(descr), descr.size(), "<f2");  // xnpy knows no '<V2'; same size
  try {
    xt::detail::parse_header(canonical_header(header), h.typestr, &h.fortran, h.shape);
  } catch (const std::exception& e) {
    throw unreadable(e.what());
  }
  h.data_start = start + length;
  if (!readable_descr(h.typestr)) throw io(path, "holds dtype '" + h.typestr + "'; shardlab reads " + kReadable);
  std::string dims;
  for (std::size_t d : h.shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  dims = "(" + dims + (h.shape.size() == 1 ? ",)" : ")");
  for (std::size_t d : h.shape)
    if (d == 0) throw io(path, "has shape " + dims + " with a dim of size 0; shardlab needs every dim at least 1");
  h.item = h.typestr == "<f2" ? 2 : h.typestr == "<f4" ? 4 : 8;
  std::uint64_t bytes = h.item;
  for (std::size_t d : h.shape)
    if (d > (std::uint64_t{1} << 62) / bytes) throw io(path, "has shape " + dims + ", more bytes than any file holds; the header is corrupt");
    else bytes *= d;
  h.elements = bytes / h.item;
  if (h.data_start + bytes > size)
    throw io(path, "is shorter than its header says (shape " + dims + " needs " + std::to_string(bytes) + " bytes of data, the file has " +
                       std::to_string(size - std::min(size, h.data_start)) + "); the file is truncated");
  if (h.data_start + bytes < size) throw io(path, "has bytes after the array's data");
  if (h.fortran) throw io(path, "is stored in Fortran order; save it in C order (numpy.ascontiguousarray)");
  return h;
}

}  // namespace

void refuse_non_finite(const std::string& path, const Tensor& t) {
  for (std::size_t i = 0; i < t.size(); ++i) {
    const double v = t.data()[i];
    if (std::isfinite(v)) continue;
    std::string index;
    std::size_t rest = i;
    for (std::size_t d = t.dimension(); d-- > 0;) {
      index = std::to_string(rest % t.shape()[d]) + (index.empty() ? "" : ", ") + index;
      rest /= t.shape()[d];
    }
    throw io(path, "holds " + std::string(std::isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf") + " at index [" + index +
                       "]; shardlab checks finite numbers only, so replace it");
  }
}

NpyArray read_npy(const std::string& name, std::uint64_t size, const std::function<void(char*, std::uint64_t)>& read) {
  std::string head(static_cast<std::size_t>(std::min<std::uint64_t>(size, std::uint64_t{1} << 20)), '\0');
  read(head.data(), head.size());
  const Header h = check_header(name, head, size);
  // Held: the float64 tensor and the stored words while they are converted.
  refuse_if_over_memory(static_cast<double>(h.elements) * static_cast<double>(8 + h.item), "reading " + name,
                        "give a smaller input");
  std::string words(static_cast<std::size_t>(h.elements * h.item), '\0');
  const std::size_t in_head = head.size() - static_cast<std::size_t>(h.data_start);
  std::memcpy(words.data(), head.data() + h.data_start, in_head);
  read(words.data() + in_head, words.size() - in_head);
  NpyArray out;
  out.data = Tensor::from_shape(h.shape);
  double* to = out.data.data();
  const auto* w = reinterpret_cast<const unsigned char*>(words.data());
  const auto word16 = [&](std::size_t i) { return static_cast<std::uint32_t>(w[2 * i] | w[2 * i + 1] << 8); };
  if (h.item == 8) {  // little-endian doubles, as this machine holds them
    std::memcpy(to, w, 8 * h.elements);
    out.type = NpyType::float64;
  } else if (h.item == 4) {
    for (std::size_t i = 0; i < h.elements; ++i) {
      float f;
      std::memcpy(&f, w + 4 * i, 4);
      to[i] = f;
    }
    out.type = NpyType::float32;
  } else if (h.bfloat16) {  // the upper half of a float32: exact
    for (std::size_t i = 0; i < h.elements; ++i) {
      const std::uint32_t bits = word16(i) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      to[i] = f;
    }
    out.type = NpyType::bfloat16;
  } else {  // no half type in C++: each little-endian 2-byte word converted exactly
    for (std::size_t i = 0; i < h.elements; ++i) to[i] = from_half(static_cast<std::uint16_t>(word16(i)));
    out.type = NpyType::float16;
  }
  return out;
}

NpyArray load_npy(const std::string& path) {
  const std::uint64_t total = input_file_size(path, "the .npy file", std::numeric_limits<std::uint64_t>::max());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw io(path, "cannot open the file for reading");
  return read_npy(path, total, [&](char* into, std::uint64_t n) {
    in.read(into, static_cast<std::streamsize>(n));
    if (static_cast<std::uint64_t>(in.gcount()) != n) throw io(path, "could not be read to its end");
  });
}

void check_writable(const std::string& path) { check_writable(path, "the .npy file"); }

void write_npy(std::ostream& out, const Tensor& data, NpyType type) {
  if (type == NpyType::float64) {
    xt::detail::dump_npy_stream(out, data);
  } else if (type == NpyType::float16) {
    // xnpy has no half type: its header, then each value as a little-endian 2-byte word.
    xt::detail::write_header(out, "<f2", false, data.shape());
    std::string words(2 * data.size(), '\0');
    for (std::size_t i = 0; i < data.size(); ++i) {
      const std::uint16_t h = to_half(data.data()[i]);
      words[2 * i] = static_cast<char>(h & 0xff);
      words[2 * i + 1] = static_cast<char>(h >> 8);
    }
    out.write(words.data(), static_cast<std::streamsize>(words.size()));
  } else if (type == NpyType::float32) {
    const xt::xarray<float> f = xt::cast<float>(data);
    xt::detail::dump_npy_stream(out, f);
  } else {
    throw Error(ErrorKind::unsupported, std::string("writing bfloat16 .npy files: ") + kNoBfloat16);
  }
}

void save_npy(const std::string& path, const Tensor& data, NpyType type) {
  write_file_whole(path, "the .npy file", [&](std::ostream& out) { write_npy(out, data, type); });
}

}  // namespace shardlab
