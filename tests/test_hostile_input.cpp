// The hostile-input suite: hundreds of bad command lines, generated over meshes, specs, dims,
// .npy headers and data, option values and case files, run against the built binaries. Each must
// be refused the same way: exit 2, exactly one line on stderr, nothing on stdout, and no file
// left where an output was asked for (the scratch directory stays empty).
// Over 400 lines (491) as one idea: one refusal rule over every surface.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <string>
#include <vector>

#include "tests/bad_meshes.hpp"
#include "tests/run_binary.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

namespace {

std::string scratch() {
  static const std::string dir = [] {
    const std::string d = "/tmp/shardlab_hostile_" + std::to_string(::getpid());
    ::mkdir(d.c_str(), 0755);
    ::mkdir((d + "/in").c_str(), 0755);
    ::mkdir((d + "/out").c_str(), 0755);
    return d;
  }();
  return dir;
}

// Removes the scratch directory when the test binary exits.
struct RemoveScratch {
  ~RemoveScratch() {
    const std::string d = "/tmp/shardlab_hostile_" + std::to_string(::getpid());
    if (::access(d.c_str(), F_OK) == 0) std::system(("rm -rf " + d).c_str());
  }
} remove_scratch;

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) out.push_back(e->d_name);
    ::closedir(d);
  }
  return out;
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A .npy file: magic, version 1, the header padded to 64 bytes, then `data`.
std::string npy(const std::string& header, const std::string& data, const std::string& version = std::string("\x01\x00", 2)) {
  std::string h = header;
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY" + version;
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>(h.size() >> 8);
  return out + h + data;
}

std::string doubles(std::initializer_list<double> v) {
  std::string s;
  for (double d : v) s.append(reinterpret_cast<const char*>(&d), sizeof d);
  return s;
}

std::string ones(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += doubles({1.0});
  return s;
}

std::string f8(const std::string& shape) { return "{'descr': '<f8', 'fortran_order': False, 'shape': " + shape + ", }"; }

// Runs every case; reports each failure with its command line.
void refuse_all(const std::vector<std::string>& commands) {
  const std::string out_dir = scratch() + "/out";
  int failed = 0;
  for (const auto& c : commands) {
    const auto r = run_binary(c);
    const bool ok = r.status == 2 && count_lines(r.err) == 1 && r.out.empty() && entries(out_dir).empty();
    if (!ok && ++failed <= 20) {
      CAPTURE(c);
      CAPTURE(r.status);
      CAPTURE(r.err);
      CAPTURE(r.out.substr(0, 300));
      CHECK(ok);
    }
    for (const auto& e : entries(out_dir)) std::remove((out_dir + "/" + e).c_str());
  }
  MESSAGE(commands.size() << " bad inputs, " << failed << " not refused as they should be");
  CHECK(failed == 0);
}

const char* const kLessons[] = {"01_mesh_and_layout", "03_dot_product_and_matmul", "07_full_sharding",
                                "08_gspmd_ffn",       "10_pairwise_backward",      "12_attention",
                                "14_data_parallel",   "16_pipeline",               "17_3d_parallelism"};

}  // namespace

TEST_SUITE("hostile input") {
  TEST_CASE("meshes: every malformed --mesh is one sentence and exit 2, on lessons and shardlab") {
    // The bad sizes (tests/bad_meshes.hpp) go to every binary; the malformed texts, which all reach
    // one parser (tests/test_mesh.cpp shows it refuses each), take turns: each binary gets every
    // third, each text goes to 3-4 binaries (every binary on all of them was 308 runs, 8 s).
    using shardlab::testing::kBadMeshSizes;
    using shardlab::testing::kBadMeshTexts;
    using shardlab::testing::shell_quoted;
    std::vector<std::string> binaries(std::begin(kLessons), std::end(kLessons));
    binaries.push_back("shardlab matmul --a-spec _,_ --b-spec _,_ --out " + scratch() + "/out/c.npy");
    binaries.push_back("shardlab ffn");
    std::vector<std::string> commands;
    for (std::size_t b = 0; b < binaries.size(); ++b) {
      for (const auto& m : kBadMeshSizes) commands.push_back(binaries[b] + " --mesh " + shell_quoted(m));
      for (std::size_t t = b % 3; t < kBadMeshTexts.size(); t += 3)
        commands.push_back(binaries[b] + " --mesh " + shell_quoted(kBadMeshTexts[t]));
    }
    refuse_all(commands);
  }

  TEST_CASE("specs and mappings: malformed or unfitting specs are refused") {
    const std::vector<std::string> specs = {"''",      "X",       "X,Y,Z",  "Q,_",     "X,X",     "_,_{",     "{U_X}",
                                            "X+Y,_",   "'(X,_'",  "'_,Y)'",   "x,_",     "X,_{U_X}", "_,_{U_Q}", "',_'",
                                            "_,,",     "X Y",     "_,_{U}", "'(X,X),_'", "1,_",     "_,-"};
    std::vector<std::string> commands;
    const std::string out = " --mesh X=2,Y=2 --out " + scratch() + "/out/c.npy";
    for (const auto& s : specs) {
      commands.push_back("shardlab matmul --a-spec " + s + " --b-spec _,_" + out);
      commands.push_back("shardlab matmul --a-spec _,_ --b-spec " + s + out);
      commands.push_back("shardlab matmul --a-spec _,_ --b-spec _,_ --out-spec " + s + out);
      commands.push_back("shardlab einsum ij,jk-\\>ik --specs " + s + " _,_ --dims i=4,j=4,k=4" + out);
    }
    for (const std::string m : {"''", "x", "x:", ":X", "input_rows:Q", "input_rows:X,input_rows:X", "nonsense:X"})
      commands.push_back("02_reduction_allreduce --mapping " + m);
    refuse_all(commands);
  }

  TEST_CASE("dims and shapes: zero, negative, huge, unused or malformed sizes are refused") {
    const std::vector<std::string> dims = {"''",         "i=0",         "i=-1",      "i=1e3",     "z=3",      "i",
                                           "=3",         "i=2,i=3",     "i=4,j=4",   "i=99999999999999999999", "'i=4;j=4'",
                                           "i=4,j=4,k=4,q=2", "i=x",    "I=4",       "i=4,,j=4",  "i=100000,j=100000,k=100000"};
    std::vector<std::string> commands;
    for (const auto& d : dims)
      commands.push_back("shardlab einsum ij,jk-\\>ik --specs _,_ _,_ --dims " + d + " --out " + scratch() + "/out/c.npy");
    for (const std::string s : {"''", "0,4,4", "4,0,4", "4,4,0", "-1,4,4", "4,4", "4,4,4,4", "a,b,c", "1e3,4,4",
                                "100000,100000,100000", "99999999999999999999,4,4"})
      commands.push_back("shardlab matmul --a-spec _,_ --b-spec _,_ --shape " + s + " --out " + scratch() + "/out/c.npy");
    for (const std::string d : {"''", "B=0,S=4,M=16,H=64", "B=-8,S=4,M=16,H=64", "Q=2",
                                "B=100000,S=100000,M=1000,H=1000", "B=8,S=4,M=16,H=64,Z=2"})
      commands.push_back("shardlab ffn --dims " + d);
    refuse_all(commands);
  }

  TEST_CASE(".npy inputs: bad headers and data, special files, non-finite values") {
    const std::string in = scratch() + "/in/";
    const std::vector<std::pair<std::string, std::string>> files = {
        {"empty", ""},
        {"magic", "hello, not numpy at all, not even close, really not"},
        {"version3", npy(f8("(4, 4)"), ones(16), std::string("\x03\x00", 2))},
        {"i4", npy("{'descr': '<i4', 'fortran_order': False, 'shape': (4, 4), }", std::string(64, '\0'))},
        {"big_endian", npy("{'descr': '>f8', 'fortran_order': False, 'shape': (4, 4), }", ones(16))},
        {"fortran", npy("{'descr': '<f8', 'fortran_order': True, 'shape': (4, 4), }", ones(16))},
        {"zero_rows", npy(f8("(0, 4)"), "")},
        {"zero_cols", npy(f8("(4, 0)"), "")},
        {"overflow", npy(f8("(4294967296, 4294967296)"), ones(4))},
        {"overflow3", npy(f8("(2097152, 2097152, 2097152)"), ones(4))},
        {"truncated", npy(f8("(4, 4)"), ones(10))},
        {"trailing", npy(f8("(4, 4)"), ones(16) + "xx")},
        {"nan", npy(f8("(4, 4)"), ones(5) + doubles({0.0 / 0.0}) + ones(10))},
        {"inf", npy(f8("(4, 4)"), doubles({1.0 / 0.0}) + ones(15))},
        {"neg_inf", npy(f8("(4, 4)"), ones(15) + doubles({-1.0 / 0.0}))},
        {"huge_for_f32", npy(f8("(4, 4)"), doubles({1e39}) + ones(15))},
        {"rank3", npy(f8("(2, 2, 4)"), ones(16))},
        {"no_shape", npy("{'descr': '<f8', 'fortran_order': False, }", ones(16))},
        {"bad_shape", npy(f8("(4, x)"), ones(16))},
        {"negative_dim", npy(f8("(-4, 4)"), ones(16))},
        {"header_cut", std::string("\x93NUMPY\x01\x00\xff\x00{'descr'", 18)},
    };
    const std::string ok = in + "ok.npy";
    write(ok, npy(f8("(4, 4)"), ones(16)));
    const std::string fifo = in + "fifo.npy";
    ::mkfifo(fifo.c_str(), 0644);
    std::vector<std::string> paths = {fifo, "/dev/zero", "/dev/null", in, in + "missing.npy", "''"};
    for (const auto& [name, bytes] : files) {
      write(in + name + ".npy", bytes);
      paths.push_back(in + name + ".npy");
    }
    std::vector<std::string> commands;
    const std::string tail = " --mesh X=2 --dtype float32 --out " + scratch() + "/out/c.npy";
    for (const auto& p : paths) {
      commands.push_back("shardlab matmul --a-spec X,_ --b-spec _,_ --a-in " + p + " --b-in " + ok + tail);
      commands.push_back("shardlab matmul --a-spec X,_ --b-spec _,_ --a-in " + ok + " --b-in " + p + tail);
    }
    commands.push_back("shardlab matmul --a-spec X,_ --b-spec _,_ --a-in " + ok + tail);
    refuse_all(commands);
  }

  TEST_CASE("option values: empty, negative, wrapped, out of range or unknown") {
    const std::string out = scratch() + "/out/";
    const std::vector<std::string> commands = {
        "01_mesh_and_layout --seed -1",
        "01_mesh_and_layout --seed 99999999999999999999999",
        "01_mesh_and_layout --seed 0x10",
        "01_mesh_and_layout --seed 010",
        "01_mesh_and_layout --seed ''",
        "01_mesh_and_layout --seed 1.5",
        "01_mesh_and_layout --dtype float8",
        "01_mesh_and_layout --dtype ''",
        "01_mesh_and_layout --backend gpu",
        "01_mesh_and_layout --backend ''",
        "01_mesh_and_layout --collectives fast",
        "01_mesh_and_layout --trace ''",
        "01_mesh_and_layout --trace /dev/full",
        "01_mesh_and_layout --trace /nonexistent_dir/t.json",
        // A directory that takes no files (was found after the run, exit 3): refused before it.
        "01_mesh_and_layout --trace /proc/shardlab_t.json",
        "shardlab moe --trace /proc/shardlab_t.json",
        "shardlab moe --collectives foo",  // was accepted, and the run passed
        "shardlab ring-attention --trace /proc/shardlab_t.json",
        "19_context_parallel --trace /proc/shardlab_t.json",
        "shardlab matmul --a-spec _,Y --b-spec Y,_ --trace /proc/shardlab_t.json",
        "01_mesh_and_layout --trace " + out,
        "01_mesh_and_layout --no-such-flag",
        "08_gspmd_ffn --seed -5",
        "14_data_parallel --dtype int8",
        "shardlab matmul --a-spec _,_ --b-spec _,_ --seed -1",
        "shardlab matmul --a-spec _,_ --b-spec _,_ --out ''",
        "shardlab matmul --a-spec _,_ --b-spec _,_ --out /dev/full",
        "shardlab matmul --a-spec _,_ --b-spec _,_ --out " + out,
        "shardlab matmul --a-spec _,_ --b-spec _,_ --out /nonexistent_dir/c.npy",
        "shardlab matmul --a-spec _,_ --b-spec _,_ --out-dtype bfloat16 --out " + out + "c.npy",
        "shardlab matmul --a-spec _,_ --b-spec _,_ --out-dtype i4 --out " + out + "c.npy",
        "shardlab matmul --a-spec _,_ --b-spec _,_ --names a,b --out " + out + "c.npy",
        "shardlab matmul --a-spec _,_ --b-spec _,_ --names a,a,c --out " + out + "c.npy",
        "shardlab matmul --a-spec _,_ --b-spec _,_ --trace " + out + "t.json --plan-only",
        "shardlab bench collectives --iters 0",
        "shardlab bench collectives --iters -1",
        "shardlab bench collectives --iters 2000000000",  // was std::bad_alloc at run time
        "shardlab bench collectives --iters 99999999999999999999999",
        "shardlab bench collectives --warmup 2000000000",
        "shardlab bench collectives --warmup -1",
        "shardlab bench collectives --max 1000G",
        "shardlab bench collectives --max 99999999999999999999G",
        "shardlab bench collectives --min 0",
        "shardlab bench collectives --min 8K --max 4K",
        "shardlab bench collectives --factor 1",
        "shardlab bench collectives --ops all_shuffle",
        "shardlab bench collectives --backend mpi --csv " + out + "b.csv",
        "shardlab bench collectives --csv /dev/full",
        "shardlab bench collectives --csv " + out,
        "shardlab bench collectives --max 4K --csv /nonexistent_dir/b.csv",
        "shardlab sweep --what busbw --backend mpi --out " + out,
        "shardlab sweep --what nonsense --out " + out,
        "shardlab sweep --max-devices 0 --out " + out,
        "shardlab sweep --machine /dev/zero --out " + out,
        "shardlab cost --bytes 99999999999G",
        "shardlab cost --bytes -4",
        "shardlab cost --bytes ''",
        "shardlab cost --devices 0",
        "shardlab zero --params 0 --devices 4",
        "shardlab zero --params nan --devices 4",
        "shardlab zero --params 7.5e9 --devices 0",
        "shardlab zero --params 7.5e9 --devices 4 --optimizer sgdm",
        "shardlab pipeline --stages 0",
        "shardlab pipeline --chunks -1",
        "shardlab pipeline --schedule zigzag",
        "shardlab pipeline --layers 99",
        "shardlab ffn --strategy nonsense",
        "shardlab ffn --machine /dev/zero",
        "shardlab ffn --preset tpu-v9",
        "shardlab nonsense",
        "shardlab --nonsense",
        // outputs on one file, or on an input
        "shardlab matmul --a-spec _,_ --b-spec _,_ --out " + out + "c.npy --trace " + out + "c.npy",
        "shardlab bench collectives --max 4K --iters 1 --csv " + out + "b.csv --trace " + out + "b.csv",
        "shardlab run harness/cases/row_ffn.toml --trace harness/cases/row_ffn.toml",
        "shardlab check harness/cases --junit harness/cases/row_ffn.toml",
        "shardlab check harness/cases/row_ffn.toml --junit " + out + "j.xml --trace " + out + "j.xml",
        "shardlab matmul --a-spec _,_ --b-spec _,_ --plan-only --out " + out + "c.npy",
        "shardlab matmul --a-spec _,_ --b-spec _,_ --out " + out + std::string(300, 'X') + ".npy",
        // work that would run for minutes or without bound
        "shardlab matmul --a-spec _,_ --b-spec _,_ --mesh A=2,B=2,C=2,D=2,E=2,F=2,G=2 --plan-only",
        "shardlab bench collectives --mesh X=4096 --max 1K",
        "shardlab pipeline --width 2000",
        "05_inner_axes_mismatch --shape 1000000,1000000,1000000",
        "08_gspmd_ffn --dims B=100000,S=100000",
        "10_pairwise_backward --dims B=100000,S=100000",
        // settings that cannot apply
        "01_mesh_and_layout --collectives native",
        "shardlab matmul --a-spec _,_ --b-spec _,_ --collectives native",
        "shardlab ffn --collectives native",
        "shardlab check " + out,
        "shardlab check harness/cases --backend gpu --junit " + out + "j.xml",
        "shardlab check harness/cases --backend mpi --junit " + out + "j.xml",
        "shardlab zero --params 0.5 --devices 4",
        "shardlab zero --params 1.5 --devices 4",
        "shardlab zero --params 0x10 --devices 4",
        "shardlab run harness/cases/gspmd_ffn.toml --memory-limit 0",
        "shardlab run harness/cases/gspmd_ffn.toml --memory-limit nan",
        "shardlab run harness/cases/gspmd_ffn.toml --memory-limit -1",
        "shardlab check harness/cases --memory-limit inf",
        // a limit below what the case needs refuses it, naming the option that lifts it
        "shardlab run harness/cases/gspmd_ffn.toml --memory-limit 0.00001",
    };
    refuse_all(commands);
    const auto low = run_binary("shardlab run harness/cases/gspmd_ffn.toml --memory-limit 0.00001");
    CHECK(low.err.find("raise --memory-limit") != std::string::npos);
    CHECK(run_binary("shardlab run harness/cases/gspmd_ffn.toml --memory-limit 0.5 --quiet").status == 0);
  }

  TEST_CASE("case files: invalid TOML, unknown keys, wrong types and sizes are one sentence each") {
    const std::string in = scratch() + "/in/";
    const std::string good =
        "name = \"c\"\nmesh = \"Y=4\"\ndims = { b = 8, s = 4, m = 16, h = 64 }\n"
        "inputs = { x = \"bsm\", W_in = \"mh\", W_out = \"hm\" }\n"
        "shard = { x = \"_,_,_\", W_in = \"_,Y\", W_out = \"_,Y\" }\n"
        "ops = [\n  { out = \"h\", op = \"einsum\", eq = \"bsm,mh->bsh\", in = [\"x\", \"W_in\"] },\n"
        "  { out = \"y\", op = \"einsum\", eq = \"bsh,hm->bsm\", in = [\"h\", \"W_out\"] },\n]\n"
        "outputs = [\"y\"]\n";
    const auto with = [&](const std::string& from, const std::string& to) {
      std::string s = good;
      const auto at = s.find(from);
      REQUIRE(at != std::string::npos);
      return s.replace(at, from.size(), to);
    };
    const std::vector<std::string> bodies = {
        "",
        "this is not toml",
        "name = ",
        with("mesh = \"Y=4\"", "mesh = \"\""),
        with("mesh = \"Y=4\"", "mesh = \"_=4\""),
        with("mesh = \"Y=4\"", "mesh = 4"),
        with("mesh = \"Y=4\"", "mesh = \"Y=0\""),
        with("b = 8", "b = 0"),
        with("b = 8, s = 4, m = 16", "b = 64, s = 4096, m = 8192"),  // 2^31 elements fit a tensor, not memory
        with("h = 64", "h = 1000000"),  // ran past 30 s toward 12.6 GB: over the case limit
        with("b = 8", "b = -8"),
        with("b = 8", "b = 99999999999999999999"),
        with("b = 8", "b = 8.5"),
        with("b = 8", "b = \"8\""),
        // h = 62 does not divide Y=4: split as torch.chunk by default, refused under uneven = "none".
        with("mesh = \"Y=4\"\ndims = { b = 8, s = 4, m = 16, h = 64 }",
             "mesh = \"Y=4\"\nuneven = \"none\"\ndims = { b = 8, s = 4, m = 16, h = 62 }"),
        with("mesh = \"Y=4\"", "mesh = \"Y=4\"\nlayouts = \"cheapest\""),
        with("shard = { x = \"_,_,_\",", "shard = { x = \"auto\","),
        with("h = 64", "h = 64, z = 3"),
        with("x = \"bsm\"", "x = \"\""),
        with("x = \"bsm\"", "x = \"bsq\""),
        with("W_in = \"_,Y\"", "W_in = \"_,Q\""),
        with("W_in = \"_,Y\"", "W_in = \"_\""),
        with("op = \"einsum\", eq = \"bsm,mh->bsh\"", "op = \"einsum\", eq = \"\""),
        with("op = \"einsum\", eq = \"bsm,mh->bsh\"", "op = \"gelo\", eq = \"bsm,mh->bsh\""),
        with("in = [\"x\", \"W_in\"]", "in = [\"x\", \"nothing\"]"),
        with("outputs = [\"y\"]", "outputs = []"),
        with("outputs = [\"y\"]", "outputs = [\"q\"]"),
        good + "unknown_key = 1\n",
        good + "[expect]\nmax_bytes_per_device = -1\n",
        good + "[expect]\ncollectives = [\"all_shuffle h over Y\"]\nnot_a_key = 2\n",
        good + "[expect]\ncollectives = [\"all_shuffle h over Y\"]\n",
        good + "[expect]\ncollectives = [\"all_gather h over Q\"]\n",
        good + "[expect]\ncollectives = [\"all_gather over\"]\n",
        good + "[expect]\ncollectives = [\"\"]\n",
        with("name = \"c\"", "name = \"a\\nb\""),
        with("name = \"c\"", "name = \"a\\u001b[31mred\""),
        with("outputs = [\"y\"]", "outputs = [\"y\", \"y\"]"),
    };
    std::vector<std::string> commands;
    for (std::size_t i = 0; i < bodies.size(); ++i) {
      const std::string path = in + "case" + std::to_string(i) + ".toml";
      write(path, bodies[i]);
      commands.push_back("shardlab run " + path + " --trace " + scratch() + "/out/t.json");
    }
    commands.push_back("shardlab run " + in + "missing.toml");
    commands.push_back("shardlab run /dev/zero");
    commands.push_back("shardlab run " + in);
    refuse_all(commands);
  }

  // Issue 29's last campaign on ring-attention, moe, lessons 19 and 20, --uneven and exercise.
  TEST_CASE("ring attention, MoE and exercises: sizes past their limits and odd values are one sentence") {
    const std::string in = scratch() + "/in/";
    write(in + "bad_answer.txt", "garbage line\n");
    write(in + "long_answer.txt", std::string(5000, 'a') + "\n");
    const std::vector<std::string> commands = {
        // sizes that ran for minutes or took gigabytes
        "19_context_parallel --mesh X=512",           // past 30 s
        "19_context_parallel --mesh X=4096",          // 1.1 GB
        "19_context_parallel --mesh X=64",            // 7 to 16 s
        // the uneven planner: past 30 s on 64x64 (now 4.2 s on 32x32)
        "shardlab matmul --mesh X=64,Y=64 --uneven chunk --plan-only --a-spec X,Y --b-spec Y,_ --shape 100,100,100",
        "shardlab ring-attention --devices 2 --chunk 2048 --head 64",  // 1.8 GB
        "shardlab ring-attention --devices 2 --chunk 1024 --head 64",  // past 60 s
        "shardlab ring-attention --devices 128",      // 20 s
        "shardlab ring-attention --head 2147483647",  // printed a header, then exit 2
        "shardlab ring-attention --chunk 2147483647",
        "shardlab moe --experts 1024 --top-k 1024 --capacity-factor 64",  // 5.8 GB
        "20_expert_parallel --experts 1024 --top-k 1024 --capacity-factor 64",
        // odd values
        "shardlab ring-attention --chunk -1",  // was reported as 0
        "shardlab ring-attention --chunk 0",
        "shardlab ring-attention --head -1",
        "shardlab ring-attention --chunk ''",
        "shardlab ring-attention --chunk abc",
        "shardlab ring-attention --chunk 1.5",
        "shardlab ring-attention --devices 0",
        "shardlab ring-attention --devices -1",
        "shardlab ring-attention --devices 1",
        "shardlab ring-attention --order zigzag",
        "shardlab ring-attention --order ''",
        "shardlab ring-attention --tokens 1e300",  // printed inf
        "shardlab ring-attention --tokens nan",
        "shardlab ring-attention --tokens inf",
        "shardlab ring-attention --tokens -1",
        "shardlab ring-attention --tokens 0",
        "shardlab ring-attention --tokens 1000.5",
        "shardlab ring-attention --tokens ''",
        "shardlab ring-attention --tokens abc",
        "shardlab ring-attention --width 0",
        "shardlab ring-attention --width nan",
        "shardlab ring-attention --width inf",
        "shardlab ring-attention --width -4096",
        "shardlab moe --experts 0",
        "shardlab moe --experts -1",
        "shardlab moe --experts ''",
        "shardlab moe --top-k 0",
        "shardlab moe --top-k 9",
        "shardlab moe --capacity-factor 0",
        "shardlab moe --capacity-factor -1",
        "shardlab moe --capacity-factor nan",
        "shardlab moe --capacity-factor inf",
        "shardlab moe --capacity-factor abc",
        "shardlab moe --mesh X=2,Y=2,Z=2",
        "shardlab moe --mesh X=3",
        "20_expert_parallel --top-k 0",
        "20_expert_parallel --capacity-factor nan",
        "19_context_parallel --mesh X=1",
        "19_context_parallel --mesh X=2,Y=2",
        // a malformed answer from a pipe: refused before the question prints (it printed it, then exit 2)
        "shardlab exercise --lesson 04 < " + in + "bad_answer.txt",
        "shardlab exercise --lesson 19 < " + in + "long_answer.txt",
    };
    refuse_all(commands);
    // The sentence says what was typed, and names the limit and the estimate.
    CHECK(run_binary("shardlab ring-attention --chunk -1").err.find("not -1") != std::string::npos);
    const auto moe = run_binary("shardlab moe --experts 1024 --top-k 1024 --capacity-factor 64").err;
    CHECK(moe.find("needs about 7.0 GiB, more than the 1.0 GiB it may use") != std::string::npos);
    CHECK(run_binary("19_context_parallel --mesh X=512").err.find("more than the 32") != std::string::npos);
  }

  TEST_CASE("--inject: a fault that found no place is no success, and FAIL lines stay within 100 columns") {
    for (const std::string c : {"shardlab ring-attention --inject skip-add", "shardlab moe --inject skip-update",
                                "19_context_parallel --inject swap-blocks", "20_expert_parallel --inject skip-update"}) {
      CAPTURE(c);
      const auto r = run_binary(c);
      CHECK(r.status == 1);  // was 0, with PASS
      CHECK(r.out.find("found no place") != std::string::npos);
      const auto j = run_binary(c + " --json");
      CHECK(j.status == 1);
      CHECK(j.out.find("\"injected_struck\": 0") != std::string::npos);
    }
    for (const std::string c : {"shardlab ring-attention", "shardlab moe", "19_context_parallel", "20_expert_parallel",
                                "shardlab matmul --mesh X=4 --uneven pad --a-spec X,_ --b-spec _,_ --shape 9,4,3 --out-spec _,_"}) {
      CAPTURE(c);
      const auto r = run_binary(c + " --inject perturb:1e-3");
      CHECK(r.status == 1);
      std::size_t widest = 0, start = 0;
      for (std::size_t end; (end = r.out.find('\n', start)) != std::string::npos; start = end + 1)
        widest = std::max(widest, end - start);
      CHECK(widest <= 100);  // the verdict lines were up to 845 columns
    }
    // --uneven pad: device 3 holds no real row of C's 9 (3 + 3 + 3 + 0 padded), so perturb found
    // only padding and the run passed; now it says it found no place (exit 1).
    const auto pad = run_binary("shardlab matmul --mesh X=4 --uneven pad --a-spec X,_ --b-spec _,_ --shape 9,4,3 "
                                "--out-spec X,_ --json --inject perturb:1e-3");
    CHECK(pad.status == 1);
    CHECK(pad.out.find("\"injected_struck\": 0") != std::string::npos);
    // --chunk 1 is valid input: its checks pass (the memory claim failed on it).
    CHECK(run_binary("shardlab ring-attention --chunk 1 --quiet").status == 0);
  }
}
