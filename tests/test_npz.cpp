// harness/check/npz.cpp: .npz files numpy wrote (committed fixtures, stored and deflated, zip64
// headers) read exactly; save_npz's archives read back bit for bit, by this reader and by libzip
// directly; archives built here with libzip (a writer kept apart from the reader under test) with
// a deflated entry, a stray entry, or cut short; a folder of NAME.npy files.
#include <doctest/doctest.h>

#include <zip.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "core/error.hpp"
#include "harness/check/npz.hpp"

using namespace shardlab;

namespace {

std::string temp(const std::string& name) {
  return "/tmp/shardlab_test_npz_" + std::to_string(::getpid()) + "_" + name;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// An archive of `entries` (name, bytes) written by libzip itself, each compressed by `method`.
void write_zip(const std::string& path, const std::vector<std::pair<std::string, std::string>>& entries,
               zip_int32_t method = ZIP_CM_STORE) {
  std::remove(path.c_str());
  int code = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
  REQUIRE(z);
  for (const auto& [name, bytes] : entries) {
    zip_source_t* s = zip_source_buffer(z, bytes.data(), bytes.size(), 0);
    const zip_int64_t at = zip_file_add(z, name.c_str(), s, 0);
    REQUIRE(at >= 0);
    zip_set_file_compression(z, static_cast<zip_uint64_t>(at), method, 0);
  }
  REQUIRE(zip_close(z) == 0);
}

std::string npy(const Tensor& t, NpyType type = NpyType::float64) {
  std::ostringstream out;
  write_npy(out, t, type);
  return out.str();
}

std::string load_error(const std::string& path) {
  try {
    load_arrays(path);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::io);
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
    return e.what();
  }
  FAIL("expected Error(io) from " << path);
  return "";
}
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_SUITE("npz") {
  TEST_CASE("numpy's np.savez and np.savez_compressed files read exactly (committed fixtures)") {
    // Made by numpy 1.24: a = [[1.5, -2], [0.25, 3]] float64, h = [1, -2, 0.0999755859375, 65504]
    // float16, f = arange(6).reshape(2, 3) / 4 float32; savez writes zip64 extra fields.
    for (const std::string file : {"tests/data/numpy_savez.npz", "tests/data/numpy_savez_compressed.npz"}) {
      CAPTURE(file);
      const NamedArrays got = load_arrays(file);
      REQUIRE(got.arrays.size() == 3);
      CHECK(got.arrays.at("a").type == NpyType::float64);
      CHECK(got.arrays.at("a").data == Tensor{{1.5, -2}, {0.25, 3}});
      CHECK(got.arrays.at("h").type == NpyType::float16);
      CHECK(got.arrays.at("h").data == Tensor{1, -2, 0.0999755859375, 65504});
      CHECK(got.arrays.at("f").type == NpyType::float32);
      CHECK(got.arrays.at("f").data == Tensor{{0, 0.25, 0.5}, {0.75, 1, 1.25}});
      CHECK(got.where("a") == file + ":a.npy");
    }
  }

  TEST_CASE("save_npz: float64 entries NAME.npy that libzip lists and this reader reads back bit for bit") {
    const std::string p = temp("save.npz");
    const Tensor y = {{0.1, -1e-300}, {3e300, 1.0 / 3}}, dy = {{1, 2}, {3, 4}};
    save_npz(p, {{"y", y}, {"dy", dy}, {"ref/y", y + 1}});
    int code = 0;
    zip_t* z = zip_open(p.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
    REQUIRE(z);
    CHECK(zip_get_num_entries(z, 0) == 3);
    CHECK(std::string(zip_get_name(z, 0, 0)) == "y.npy");
    CHECK(std::string(zip_get_name(z, 2, 0)) == "ref/y.npy");
    zip_discard(z);
    const NamedArrays back = load_arrays(p);
    CHECK(back.arrays.at("y").data == y);  // == on doubles: bit for bit here (no NaN)
    CHECK(back.arrays.at("dy").data == dy);
    CHECK(back.arrays.at("ref/y").data == y + 1);
    CHECK(back.arrays.at("y").type == NpyType::float64);
    CHECK_THROWS_AS(save_npz(p, {{"y", y}, {"y", dy}}), Error);
    std::remove(p.c_str());
  }

  TEST_CASE("save_npz writes nothing over /dev/full, a folder or into a missing one; an old file stays whole") {
    const Tensor t = {1.0, 2.0};
    for (const std::string bad : {"/dev/full", "/tmp", "/nonexistent_dir_shardlab/x.npz"}) {
      CAPTURE(bad);
      CHECK_THROWS_AS(save_npz(bad, {{"t", t}}), Error);
    }
    const std::string p = temp("old.npz");
    save_npz(p, {{"t", t}});
    const std::string before = file_bytes(p);
    CHECK_THROWS_AS(save_npz(p, {{"", t}}), Error);
    CHECK(file_bytes(p) == before);
    std::remove(p.c_str());
  }

  TEST_CASE("deflated entries (np.savez_compressed) and every element type, in an archive libzip wrote") {
    const std::string p = temp("deflate.npz");
    const Tensor x = {{0.5, -0.25, 2}, {4, 8, -16}};
    write_zip(p, {{"x.npy", npy(x)}, {"h.npy", npy(x, NpyType::float16)}, {"f.npy", npy(x, NpyType::float32)}},
              ZIP_CM_DEFLATE);
    const NamedArrays got = load_arrays(p);
    for (const std::string name : {"x", "h", "f"}) CHECK(got.arrays.at(name).data == x);
    CHECK(got.arrays.at("h").type == NpyType::float16);
    std::remove(p.c_str());
  }

  TEST_CASE("malformed archives: each one sentence naming the file, nothing read") {
    const std::string p = temp("bad.npz");
    const Tensor x = {1.0, 2.0, 3.0, 4.0};
    write_zip(p, {{"x.npy", npy(x)}, {"notes.txt", "hello"}});
    CHECK(has(load_error(p), "holds an entry 'notes.txt', not NAME.npy"));
    // Cut short: the central directory at the end is gone.
    write_zip(p, {{"x.npy", npy(x)}});
    const std::string whole = file_bytes(p);
    std::ofstream(p, std::ios::binary | std::ios::trunc) << whole.substr(0, whole.size() / 2);
    CHECK(has(load_error(p), p + ": not a readable .npz file ("));
    // One data byte changed: its CRC no longer matches.
    std::string bent = whole;
    const std::size_t at = bent.find("\x93NUMPY") + 128 + 3;  // a byte of the data, past the header
    bent[at] = static_cast<char>(bent[at] ^ 0x40);
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bent;
    CHECK(has(load_error(p), "the archive is corrupt"));
    // An entry whose .npy is itself cut short: npy.cpp's check, named as the entry.
    write_zip(p, {{"x.npy", npy(x).substr(0, npy(x).size() - 8)}});
    CHECK(has(load_error(p), p + ":x.npy: is shorter than its header says"));
    std::ofstream(p, std::ios::binary | std::ios::trunc) << "not a zip at all";
    CHECK(has(load_error(p), "not a readable .npz file"));
    CHECK(has(load_error(temp("missing.npz")), "no such file or folder"));
    CHECK(has(load_error("/dev/null"), "is not a regular file or a folder"));
    std::remove(p.c_str());
  }

  TEST_CASE("a folder of NAME.npy files; other files left alone; an empty folder refused") {
    const std::string dir = temp("dir");
    std::filesystem::create_directories(dir);
    save_npy(dir + "/W_in.npy", Tensor{{1, 2}, {3, 4}}, NpyType::float32);
    save_npy(dir + "/x.npy", Tensor{0.5, 0.25});
    std::ofstream(dir + "/README") << "not an array";
    const NamedArrays got = load_arrays(dir);
    CHECK(got.arrays.size() == 2);
    CHECK(got.arrays.at("W_in").data == Tensor{{1, 2}, {3, 4}});
    CHECK(got.where("x") == dir + "/x.npy");
    std::filesystem::remove(dir + "/W_in.npy");
    std::filesystem::remove(dir + "/x.npy");
    CHECK(has(load_error(dir), "holds no NAME.npy file"));
    std::filesystem::remove_all(dir);
  }
}
