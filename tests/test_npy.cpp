// harness/check/npy.cpp: files written byte by byte from NumPy's format description are read back
// exactly; saved files have the documented layout; every malformed file is an io error; float16
// converts by hand-worked IEEE bit patterns; bfloat16 as ml_dtypes saves it ('<V2') reads exactly,
// and is refused as an output type; a NUL byte in a header is refused, as NumPy does.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include <unistd.h>

#include "core/error.hpp"
#include "harness/check/npy.hpp"

using namespace shardlab;

namespace {
std::string temp_path(const std::string& name) {
  return "/tmp/shardlab_test_npy_" + std::to_string(::getpid()) + "_" + name;
}

// A version 1.0 .npy file: magic, 2-byte little-endian header length, the header dict padded
// with spaces and ended by '\n' so that the data starts at a multiple of 64, then the data.
std::string npy_bytes(const std::string& dict, const std::string& data) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

template <class T>
std::string raw(std::initializer_list<T> values) {
  std::string s;
  for (T v : values) s.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return s;
}

// Bytes of 16-bit words, low byte first (the '<' of '<f2'), whatever the host's order.
std::string le16(std::initializer_list<std::uint16_t> words) {
  std::string s;
  for (std::uint16_t w : words) {
    s += static_cast<char>(w & 0xff);
    s += static_cast<char>(w >> 8);
  }
  return s;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}
std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string io_error(const std::string& path) {
  try {
    load_npy(path);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::io);
    return e.what();
  }
  FAIL("expected Error(io)");
  return "";
}
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

TEST_SUITE("npy") {
  TEST_CASE("reads float64 and float32 files laid out by hand") {
    const std::string f8 = temp_path("f8.npy"), f4 = temp_path("f4.npy");
    write_file(f8, npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",
                             raw<double>({1, 2, 3, 4, 5, -6.5})));
    write_file(f4, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", raw<float>({0.5f, -2, 7})));
    NpyArray a = load_npy(f8);
    CHECK(a.type == NpyType::float64);
    CHECK(a.data == Tensor{{1, 2, 3}, {4, 5, -6.5}});
    NpyArray b = load_npy(f4);
    CHECK(b.type == NpyType::float32);
    CHECK(b.data == Tensor{0.5, -2, 7});
    std::remove(f8.c_str());
    std::remove(f4.c_str());
  }

  TEST_CASE("the header's keys in any order, and without the trailing comma (NumPy's format fixes neither)") {
    const std::string p = temp_path("order.npy");
    for (const char* header : {"{'shape': (2, 3), 'fortran_order': False, 'descr': '<f8', }",
                               "{'fortran_order': False, 'shape': (2, 3), 'descr': '<f8'}",
                               "{'shape': (2, 3), 'descr': '<f8', 'fortran_order': False}"}) {
      CAPTURE(header);
      write_file(p, npy_bytes(header, raw<double>({1, 2, 3, 4, 5, -6.5})));
      const NpyArray a = load_npy(p);
      CHECK(a.type == NpyType::float64);
      CHECK(a.data == Tensor{{1, 2, 3}, {4, 5, -6.5}});
    }
    std::remove(p.c_str());
  }

  TEST_CASE("save writes the documented header and raw data, and reads back bit for bit") {
    const std::string p = temp_path("save.npy");
    const Tensor t = {{1.25, -3}, {1e-300, 7}};
    save_npy(p, t);
    const std::string bytes = read_file(p);
    REQUIRE(bytes.size() > 10);
    CHECK(bytes.substr(0, 6) == "\x93NUMPY");
    CHECK(has(bytes, "'descr': '<f8'"));
    CHECK(has(bytes, "'fortran_order': False"));
    CHECK(has(bytes, "(2, 2)"));
    CHECK(bytes.substr(bytes.size() - 32) == raw<double>({1.25, -3, 1e-300, 7}));
    CHECK(load_npy(p).data == t);
    save_npy(p, t, NpyType::float32);
    NpyArray f = load_npy(p);
    CHECK(f.type == NpyType::float32);
    CHECK(f.data(0, 0) == 1.25);
    CHECK(f.data(1, 0) == 0.0);  // 1e-300 underflows in float32
    std::remove(p.c_str());
  }

  TEST_CASE("save leaves no temporary file behind and fails cleanly in a missing directory") {
    const std::string p = temp_path("clean.npy");
    save_npy(p, Tensor{1, 2});
    CHECK(read_file(p + ".tmp" + std::to_string(::getpid())).empty());
    std::remove(p.c_str());
    try {
      save_npy("/nonexistent_dir_shardlab/x.npy", Tensor{1});
      FAIL("expected Error(io)");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::io);
      CHECK(has(e.what(), "/nonexistent_dir_shardlab/x.npy"));
    }
  }

  TEST_CASE("malformed files: missing, not npy, truncated, trailing bytes, Fortran order, other dtypes") {
    CHECK(has(io_error(temp_path("missing.npy")), "No such file"));
    const std::string p = temp_path("bad.npy");
    write_file(p, "hello, this is not numpy at all, not even close");
    CHECK(has(io_error(p), "not a readable .npy file"));
    write_file(p, npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", raw<double>({1, 2, 3})));
    CHECK(has(io_error(p), "truncated"));
    write_file(p, npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", raw<double>({1, 2, 3})));
    CHECK(has(io_error(p), "bytes after"));
    write_file(p, npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 2), }", raw<double>({1, 2, 3, 4})));
    CHECK(has(io_error(p), "Fortran order"));
    write_file(p, npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", raw<std::int64_t>({1, 2})));
    CHECK(has(io_error(p), "dtype '<i8'"));
    std::remove(p.c_str());
  }

  TEST_CASE("parse_npy_type: float16, float32, float64; bfloat16 refused with its reason") {
    CHECK(parse_npy_type("float16") == NpyType::float16);
    CHECK(parse_npy_type("f2") == NpyType::float16);
    CHECK(parse_npy_type("float32") == NpyType::float32);
    CHECK(parse_npy_type("f8") == NpyType::float64);
    for (const std::string bad : {"int8", "bfloat16", "float128", ""}) {
      CAPTURE(bad);
      try {
        parse_npy_type(bad);
        FAIL("expected Error(parse)");
      } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::parse);
        const std::string m = e.what();
        CHECK(m.find('\n') == std::string::npos);
        if (bad == "bfloat16")
          CHECK(has(m, "numpy has no bfloat16 type, but float32 holds every bfloat16 value exactly, so use --out-dtype float32"));
        else
          CHECK(has(m, "use float16, float32 or float64"));
      }
    }
  }

  // Bit patterns worked by hand from IEEE 754 binary16: sign, 5 exponent bits (bias 15), 10
  // fraction bits; exponent 0 holds subnormals f * 2^-24, exponent 31 inf (f = 0) and NaN.
  TEST_CASE("float16: exact values convert both ways") {
    const std::pair<double, std::uint16_t> exact[] = {
        {0.0, 0x0000},        {1.0, 0x3c00},          {-1.0, 0xbc00},
        {0.5, 0x3800},        {-2.0, 0xc000},         {65504.0, 0x7bff},  // the largest half, 1.1111111111b * 2^15
        {0x1p-24, 0x0001},    {0x3ffp-24, 0x03ff},    {0x1p-14, 0x0400},  // smallest subnormal, largest, smallest normal
        {HUGE_VAL, 0x7c00},   {-HUGE_VAL, 0xfc00},    {0.0999755859375, 0x2e66},  // 1638 * 2^-14
    };
    for (const auto& [value, bits] : exact) {
      CAPTURE(value);
      CHECK(to_half(value) == bits);
      CHECK(from_half(bits) == value);
    }
    CHECK(to_half(-0.0) == 0x8000);
    CHECK(std::signbit(from_half(0x8000)));
    const std::uint16_t nan = to_half(std::nan(""));
    CHECK((nan & 0x7c00) == 0x7c00);  // exponent all ones ...
    CHECK((nan & 0x03ff) != 0);       // ... and a fraction: NaN, not inf
    CHECK(std::isnan(from_half(0x7e00)));
    CHECK(std::isnan(from_half(0x7c01)));
    CHECK(std::isnan(from_half(0xfe00)));
  }

  TEST_CASE("float16: values between two halves round to nearest, ties to even") {
    // Near 1 the halves are 2^-10 apart: 0x3c00 = 1, 0x3c01 = 1 + 2^-10, 0x3c02 = 1 + 2^-9.
    CHECK(to_half(1 + 0x1p-11) == 0x3c00);               // tie: to the even 0x3c00
    CHECK(to_half(1 + 0x3p-11) == 0x3c02);               // tie: to the even 0x3c02
    CHECK(to_half(-(1 + 0x1p-11)) == 0xbc00);
    CHECK(to_half(1 + 0x1p-11 + 0x1p-40) == 0x3c01);     // just past the tie: up (via float it would tie, then go down)
    CHECK(to_half(1 + 0x1p-11 - 0x1p-40) == 0x3c00);     // just short of it: down
    CHECK(to_half(0.1) == 0x2e66);                       // 0.1 = 1638.4 * 2^-14: down to 1638
    // Subnormals are 2^-24 apart.
    CHECK(to_half(0x1p-25) == 0x0000);                   // tie between 0 and 2^-24: to 0
    CHECK(to_half(0x1p-25 + 0x1p-40) == 0x0001);
    CHECK(to_half(0x3p-25) == 0x0002);                   // tie between 1 and 2 * 2^-24: to 2
    CHECK(to_half(0x7ffp-25) == 0x0400);                 // tie between the largest subnormal and 2^-14: to 2^-14
    CHECK(to_half(0x1p-30) == 0x0000);
    // The top: 65504 and 65536 (not a half) tie at 65520; even is 65536, so inf.
    CHECK(to_half(65519.0) == 0x7bff);
    CHECK(to_half(65520.0) == 0x7c00);
    CHECK(to_half(-1e6) == 0xfc00);
  }

  TEST_CASE("float16 files: one laid out by hand reads back exactly; save writes '<f2' words") {
    const std::string p = temp_path("f2.npy");
    write_file(p, npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }",
                            le16({0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0xfc00})));
    NpyArray a = load_npy(p);
    CHECK(a.type == NpyType::float16);
    CHECK(a.data == Tensor{{1, -2, 0.5}, {65504, 0x1p-24, -HUGE_VAL}});

    save_npy(p, Tensor{{1, -2}, {0.1, 1e6}}, NpyType::float16);
    const std::string bytes = read_file(p);
    REQUIRE(bytes.size() > 10);
    CHECK(bytes.substr(0, 6) == "\x93NUMPY");
    CHECK(has(bytes, "'descr': '<f2'"));
    CHECK(has(bytes, "(2, 2)"));
    CHECK((bytes.size() - 8) % 64 == 0);  // the data starts on a 64-byte boundary
    CHECK(bytes.substr(bytes.size() - 8) == le16({0x3c00, 0xc000, 0x2e66, 0x7c00}));
    NpyArray b = load_npy(p);
    CHECK(b.type == NpyType::float16);
    CHECK(b.data == Tensor{{1, -2}, {0.0999755859375, HUGE_VAL}});
    std::remove(p.c_str());
  }

  TEST_CASE("bfloat16 as ml_dtypes saves it ('<V2', '|V2', or 'bfloat16' by hand) reads exactly; big-endian is refused") {
    const std::string p = temp_path("v2.npy");
    // np.save of an ml_dtypes bfloat16 array writes descr '<V2' (numpy has no bfloat16 type); each
    // word is a float32's upper half: 0x3f80 = 1, 0xc000 = -2, 0x3dcc = 0.099609375, 0x7f7f = 3.3895e38.
    for (const std::string descr : {"<V2", "|V2", "bfloat16"}) {
      CAPTURE(descr);
      write_file(p, npy_bytes("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (4,), }",
                              le16({0x3f80, 0xc000, 0x3dcc, 0x7f7f})));
      const NpyArray a = load_npy(p);
      CHECK(a.type == NpyType::bfloat16);
      CHECK(a.data == Tensor{1, -2, 0.099609375, 3.3895313892515355e38});
    }
    write_file(p, npy_bytes("{'descr': '<V4', 'fortran_order': False, 'shape': (1,), }", le16({0, 0})));
    std::string m = io_error(p);
    CHECK(has(m, "dtype '<V4'"));
    CHECK(m.find('\n') == std::string::npos);
    write_file(p, npy_bytes("{'descr': '>f2', 'fortran_order': False, 'shape': (1,), }", std::string("\x3c\x00", 2)));  // 1.0, big-endian
    m = io_error(p);
    CHECK(has(m, "dtype '>f2'"));
    CHECK(has(m, "little-endian float16 (<f2), float32 (<f4), float64 (<f8) or bfloat16"));
    std::remove(p.c_str());
  }

  TEST_CASE("a NUL byte in the header is refused, as NumPy's literal_eval refuses it") {
    const std::string p = temp_path("nul.npy");
    for (const std::string& dict : {std::string("{'descr': '<f8'\0, 'fortran_order': False, 'shape': (1,), }", 58),
                                   std::string("{'descr': '<f8\0', 'fortran_order': False, 'shape': (1,), }", 58)}) {
      write_file(p, npy_bytes(dict, raw<double>({1.5})));
      CHECK(has(io_error(p), "its header holds a NUL byte"));
    }
    std::remove(p.c_str());
  }
}

TEST_CASE("header lengths are unsigned: 128 and 182 byte headers load, a 2 GiB one is refused at once") {
  // xnpy's reader took the length from signed chars: 0x80 became about 4 GiB, allocated before
  // any check (a 100-byte file held 8 GB); a version 1 header of 182 bytes was misread.
  const std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }";
  const auto file = [&](int version, std::size_t header_bytes) {
    std::string header = dict;
    const std::size_t start = version == 1 ? 10 : 12;
    while (start + header.size() + 1 < start + header_bytes) header += ' ';
    header += '\n';
    std::string out = "\x93NUMPY";
    out += static_cast<char>(version);
    out += '\x00';
    for (int i = 0; i < (version == 1 ? 2 : 4); ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
    return out + header + raw<double>({1.5, -2});
  };
  for (const auto& [version, bytes] : std::vector<std::pair<int, std::size_t>>{{2, 128}, {1, 182}, {2, 246}}) {
    CAPTURE(version);
    CAPTURE(bytes);
    const std::string p = temp_path("len.npy");
    write_file(p, file(version, bytes));
    const NpyArray a = load_npy(p);
    CHECK(a.data(0) == 1.5);
    CHECK(a.data(1) == -2);
  }
  const std::string p = temp_path("huge_len.npy");
  std::string bad = "\x93NUMPY";
  bad += '\x02';
  bad += '\x00';
  bad += std::string("\xff\xff\xff\x7f", 4);
  write_file(p, bad + std::string(88, ' '));
  CHECK(has(io_error(p), "more than the file holds"));
}
