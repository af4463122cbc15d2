// harness/npy.cpp: files written byte by byte from NumPy's format description are read back
// exactly; saved files have the documented layout; every malformed file is an io error.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <unistd.h>

#include "core/error.hpp"
#include "harness/npy.hpp"

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
    CHECK(has(io_error(temp_path("missing.npy")), "cannot open"));
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

  TEST_CASE("parse_npy_type") {
    CHECK(parse_npy_type("float32") == NpyType::float32);
    CHECK(parse_npy_type("f8") == NpyType::float64);
    CHECK_THROWS_AS(parse_npy_type("int8"), Error);
  }
}
