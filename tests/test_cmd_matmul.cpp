// harness/cli/cmd_matmul.cpp: `shardlab matmul` with .npy inputs writes the matmul of the inputs for
// every pair of specs on a 2x4 mesh; `shardlab einsum` plans the GSPMD FFN; bad input exits 2
// and writes nothing; a failed verdict exits 1 and writes nothing.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include <xtensor/xmath.hpp>
#include <xtensor/xsort.hpp>

#include "core/einsum.hpp"
#include "harness/check/npy.hpp"
#include "harness/check/verify.hpp"
#include "tests/run_binary.hpp"

using namespace shardlab;
using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

namespace {
std::string temp(const std::string& name) { return "/tmp/shardlab_cmd_" + std::to_string(::getpid()) + "_" + name; }
bool exists(const std::string& path) {
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    std::fclose(f);
    return true;
  }
  return false;
}

// Every spec of a rank-2 tensor on mesh axes X and Y: each axis on dim 0, dim 1 or neither, in
// either order when both share a dim. 11 in all.
std::vector<std::string> all_specs_2d() {
  return {"_,_", "X,_", "Y,_", "_,X", "_,Y", "X,Y", "Y,X", "(X,Y),_", "(Y,X),_", "_,(X,Y)", "_,(Y,X)"};
}
}  // namespace

TEST_SUITE("cmd_matmul") {
  TEST_CASE("shardlab matmul: every spec pair on a 2x4 mesh writes A B of the .npy inputs") {
    const std::string a_in = temp("a.npy"), b_in = temp("b.npy"), c_out = temp("c.npy");
    // Random reals, so the sums are not exact and the tolerance is really used.
    const Tensor a = random_uniform({8, 16}, 11, -1, 1), b = random_uniform({16, 8}, 12, -1, 1);
    save_npy(a_in, a);
    save_npy(b_in, b);
    // Reference: the plain broadcast-and-sum einsum, in this process, on the same numbers.
    const Tensor want = reference_einsum(Einsum::parse("ik,kj->ij"), a, b);
    const double tol = reduction_tolerance(16, xt::amax(xt::abs(a))() * xt::amax(xt::abs(b))());
    int pairs = 0;
    for (const auto& sa : all_specs_2d())
      for (const auto& sb : all_specs_2d()) {
        CAPTURE(sa);
        CAPTURE(sb);
        std::remove(c_out.c_str());
        auto r = run_binary("shardlab matmul --dtype float64 --mesh X=2,Y=4 --a-spec '" + sa + "' --b-spec '" + sb + "' --a-in " +
                            a_in + " --b-in " + b_in + " --out " + c_out + " --quiet");
        REQUIRE(r.status == 0);
        const Verdict v = compare("C", load_npy(c_out).data, want, tol);
        CHECK_MESSAGE(v.pass, v.line());
        ++pairs;
      }
    CHECK(pairs == 121);
    for (const auto& p : {a_in, b_in, c_out}) std::remove(p.c_str());
  }

  TEST_CASE("shardlab matmul, float32, real inputs: the program checker's bound reaches the floor; 1e-3 fails") {
    // The scalar bound this replaced (reduction_tolerance) had power 0.008 x RMS here: WEAK.
    const std::string a_in = temp("ra.npy"), b_in = temp("rb.npy");
    save_npy(a_in, random_uniform({64, 512}, 21, -1, 1));
    save_npy(b_in, random_uniform({512, 64}, 22, -1, 1));
    const std::string run = "shardlab matmul --a-spec _,Y --b-spec Y,_ --a-in " + a_in + " --b-in " + b_in + " --json";
    auto r = run_binary(run);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["checks"][0]["name"] == "C against the unsharded einsum (the program checker)");
    CHECK(j["checks"][0]["power"].get<double>() <= 1e-4);
    CHECK(run_binary(run + " --inject perturb:1e-3").status == 1);
    for (const auto& p : {a_in, b_in}) std::remove(p.c_str());
  }

  TEST_CASE("shardlab matmul --json: Case 1B's collectives and bytes, float32 in and out") {
    const std::string a_in = temp("a32.npy"), b_in = temp("b32.npy"), c_out = temp("c32.npy");
    save_npy(a_in, random_integers({4, 16}, 3, -4, 4), NpyType::float32);
    save_npy(b_in, random_integers({16, 4}, 4, -4, 4), NpyType::float32);
    auto r = run_binary("shardlab matmul --plan article --dtype float64 --a-spec _,Y --b-spec X,_ --a-in " + a_in + " --b-in " +
                        b_in + " --out " + c_out + " --out-dtype float32 --json");
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    CHECK(j["plan"] == "all_gather A over Y along dim 1; all_gather B over X along dim 0; contract ik,kj->ij");
    REQUIRE(j["collectives"].size() == 2);
    CHECK(j["collectives"][0]["bytes_per_device"] == 3 * 16 * 8);  // 3 blocks of [4, 4] doubles
    CHECK(j["collectives"][1]["bytes_per_device"] == 1 * 32 * 8);  // 1 block of [8, 4]
    CHECK(j["plan_bytes_per_device"] == 640);
    CHECK(j["unsharded_flops"] == 512);
    NpyArray c = load_npy(c_out);
    CHECK(c.type == NpyType::float32);
    // Without --out-dtype the result keeps the inputs' type.
    std::remove(c_out.c_str());
    REQUIRE(run_binary("shardlab matmul --dtype float64 --a-spec _,Y --b-spec X,_ --a-in " + a_in + " --b-in " + b_in + " --out " + c_out +
                       " --quiet").status == 0);
    CHECK(load_npy(c_out).type == NpyType::float32);
    CHECK(c.data == reference_einsum(Einsum::parse("ik,kj->ij"), load_npy(a_in).data, load_npy(b_in).data));
    for (const auto& p : {a_in, b_in, c_out}) std::remove(p.c_str());
  }

  TEST_CASE("shardlab matmul --out without --out-dtype: random inputs follow --dtype, .npy inputs keep their type") {
    const std::string c_out = temp("typed.npy");
    // Seed 5 gives A from seed 5 and B from seed 6; integer sums under 256 are exact in every type.
    const Tensor want = reference_einsum(Einsum::parse("ik,kj->ij"), random_integers({4, 16}, 5, -4, 4),
                                         random_integers({16, 4}, 6, -4, 4));
    const std::pair<std::string, std::string> cases[] = {
        {"float32", "(float32, [4, 4])"},
        {"float64", "(float64, [4, 4])"},
        {"bfloat16", "(float32, which holds the bfloat16 result exactly, [4, 4])"},  // numpy has no bfloat16
    };
    for (const auto& [dtype, wrote] : cases) {
      CAPTURE(dtype);
      std::remove(c_out.c_str());
      auto r = run_binary("shardlab matmul --dtype " + dtype + " --seed 5 --a-spec _,Y --b-spec Y,_ --out " + c_out);
      REQUIRE(r.status == 0);
      CHECK(r.out.find("wrote " + c_out + " " + wrote) != std::string::npos);
      const NpyArray c = load_npy(c_out);
      CHECK(npy_type_name(c.type) == (dtype == "float64" ? "float64" : "float32"));
      CHECK(c.data == want);
    }
    // float16 files in, float16 file out; float16 with float32 gives the wider float32.
    const std::string a16 = temp("a16.npy"), b16 = temp("b16.npy"), b32 = temp("b32f.npy");
    save_npy(a16, random_integers({4, 16}, 5, -4, 4), NpyType::float16);
    save_npy(b16, random_integers({16, 4}, 6, -4, 4), NpyType::float16);
    save_npy(b32, random_integers({16, 4}, 6, -4, 4), NpyType::float32);
    std::remove(c_out.c_str());
    auto r = run_binary("shardlab matmul --a-spec _,Y --b-spec Y,_ --a-in " + a16 + " --b-in " + b16 + " --out " + c_out);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("(float16, [4, 4])") != std::string::npos);
    NpyArray c = load_npy(c_out);
    CHECK(c.type == NpyType::float16);
    CHECK(c.data == want);
    REQUIRE(run_binary("shardlab matmul --a-spec _,Y --b-spec Y,_ --a-in " + a16 + " --b-in " + b32 + " --out " + c_out +
                       " --quiet").status == 0);
    CHECK(load_npy(c_out).type == NpyType::float32);
    // --out-dtype still decides when given.
    REQUIRE(run_binary("shardlab matmul --dtype bfloat16 --a-spec _,Y --b-spec Y,_ --out " + c_out +
                       " --out-dtype float16 --quiet").status == 0);
    CHECK(load_npy(c_out).type == NpyType::float16);
    for (const auto& p : {c_out, a16, b16, b32}) std::remove(p.c_str());
  }

  TEST_CASE("shardlab einsum: the GSPMD FFN's second matmul gathers W_out over X, reduce-scatters over Y") {
    auto r = run_binary("shardlab einsum --dtype float64 bsh,hm-\\>bsm --specs X,_,Y Y,X --out-spec X,_,Y "
                        "--dims b=8,s=4,m=16,h=32 --names h,W_out,out --json");
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    REQUIRE(j["collectives"].size() == 2);
    CHECK(j["collectives"][0]["op"] == "all_gather");
    CHECK(j["collectives"][0]["tensor"] == "W_out");
    CHECK(j["collectives"][0]["axes"] == "X");
    CHECK(j["collectives"][1]["op"] == "reduce_scatter");
    CHECK(j["collectives"][1]["axes"] == "Y");
    // The partial product [4, 4, 16] doubles; each device sends 3/4 of it.
    CHECK(j["collectives"][1]["bytes_per_device"] == 3 * 256 * 8 / 4);
  }

  TEST_CASE("shardlab einsum --plan-only prints the plan without running it") {
    auto r = run_binary("shardlab einsum --dtype float64 bsm,mh-\\>bsh --specs X,_,Y X,Y --dims b=8,s=4,m=16,h=32 --plan-only");
    CHECK(r.status == 0);
    CHECK(r.out.find("all_gather A") != std::string::npos);
    CHECK(r.out.find("predicted: 2048 bytes sent per device in 2 collectives") != std::string::npos);
    CHECK(r.out.find("Run:") == std::string::npos);
  }

  TEST_CASE("shardlab matmul --explain: the articles' plan (Case 1B) and the cheaper searched one, both byte counts") {
    // Default mesh X=2,Y=4, A 4x16 on K_Y, B 16x4 on K_X, float32. The articles' rules gather both
    // operands: A's K over Y (3 blocks of 4x4: 192 B) and B's K over X (one 8x4 block: 128 B).
    auto r = run_binary("shardlab matmul --a-spec _,Y --b-spec X,_ --explain");
    CHECK(r.status == 0);
    CHECK(r.out.find("the inputs are Case 1B; book case 2") != std::string::npos);
    CHECK(r.out.find("the articles' rules: 320 B per device (") != std::string::npos);
    CHECK(shardlab::testing::flat(r.out).find(", 2 collectives, multiplies as nothing split; book case 1") != std::string::npos);
    CHECK(r.out.find("chosen: ") != std::string::npos);
    CHECK(shardlab::testing::flat(r.out).find("the articles' rules (--plan article) send 320 bytes per device") != std::string::npos);
    // The searched plan is cheaper and still verifies.
    const auto j = nlohmann::json::parse(run_binary("shardlab matmul --a-spec _,Y --b-spec X,_ --json").out);
    CHECK(j["pass"] == true);
    CHECK(j["plan_kind"] == "search");
    CHECK(j["article_bytes_per_device"] == 320);
    CHECK(j["plan_bytes_per_device"].get<double>() < 320);
    const auto e = nlohmann::json::parse(run_binary("shardlab matmul --a-spec _,Y --b-spec X,_ --explain --json").out);
    REQUIRE(e["alternatives"].size() >= 2);
    CHECK(e["alternatives"][0]["label"] == "chosen");
    CHECK(e["alternatives"][0]["bytes_per_device"] == e["plan_bytes_per_device"]);
    CHECK(e["alternatives"][1]["label"] == "article");
    CHECK(e["alternatives"][1]["bytes_per_device"] == 320);
    CHECK(e["alternatives"][1]["plan"] == "all_gather A over Y along dim 1; all_gather B over X along dim 0; contract ik,kj->ij");
    // A partial-sum output the articles' rules refuse: kept partial over X, summed over Y only.
    const auto p = nlohmann::json::parse(
        run_binary("shardlab matmul --mesh X=2,Y=4 --a-spec _,Y --b-spec Y,_ --out-spec _,_{X} --json").out);
    CHECK(p["pass"] == true);
    CHECK(p["out_spec"] == "_,_{X}");
  }

  TEST_CASE("shardlab matmul --plan-only --json: planned collectives, no verdict fields") {
    auto r = run_binary("shardlab matmul --plan article --dtype float64 --mesh X=2,Y=4 --a-spec _,Y --b-spec Y,_ --shape 4,16,4 --plan-only --json");
    CHECK(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["plan_only"] == true);
    CHECK_FALSE(j.contains("pass"));
    CHECK_FALSE(j.contains("checks"));
    REQUIRE(j["collectives"].size() == 1);
    CHECK(j["collectives"][0]["op"] == "all_reduce");
    CHECK(j["collectives"][0]["axes"] == "Y");
    CHECK(j["collectives"][0]["group_size"] == 4);
    // Ring AllReduce of the 4x4 float64 C over 4 devices: 2(n-1)/n * 128 bytes.
    CHECK(j["collectives"][0]["predicted_bytes_per_device"] == 2 * 3 * 128 / 4);
    CHECK(j["flops_per_device"].is_number_integer());
    auto q = run_binary("shardlab ffn --dtype float64 --plan-only --quiet");
    CHECK(q.status == 0);
    CHECK(q.out.empty());
  }

  TEST_CASE("a failed verdict exits 1 and writes no output file") {
    const std::string c_out = temp("never.npy");
    std::remove(c_out.c_str());
    auto r = run_binary("shardlab matmul --dtype float64 --a-spec _,Y --b-spec Y,_ --out " + c_out + " --quiet --inject perturb:1e-9");
    CHECK(r.status == 1);
    CHECK(r.out.rfind("FAIL", 0) == 0);
    CHECK(r.err.find("not writing") != std::string::npos);
    CHECK_FALSE(exists(c_out));
  }

  TEST_CASE("bad input: one sentence on stderr, exit 2, nothing written") {
    const std::string c_out = temp("bad.npy"), a_in = temp("bad_a.npy"), b_in = temp("bad_b.npy");
    std::remove(c_out.c_str());
    save_npy(a_in, xt::zeros<double>(Shape{4, 16}));
    save_npy(b_in, xt::zeros<double>(Shape{12, 4}));
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"matmul --a-spec _,Q --b-spec Y,_", "no such axis"},
        {"matmul --a-spec _,Y --b-spec Y,_ --shape 4,6,4 --uneven none", "not divisible"},
        {"matmul --a-spec _,Y --b-spec Y,_ --uneven ragged", "use chunk"},
        {"matmul --a-spec _,Y --b-spec Y,_ --a-in /nonexistent/a.npy --b-in " + b_in, "No such file"},
        {"matmul --a-spec _,Y --b-spec Y,_ --a-in " + a_in + " --b-in " + b_in, "size 16 in A but 12 in B"},
        {"matmul --a-spec _,Y --b-spec Y,_ --a-in " + a_in, "give both --a-in and --b-in"},
        {"matmul --a-spec _,Y --b-spec Y,_ --out /nonexistent_dir/c.npy", "directory /nonexistent_dir does not exist"},
        {"matmul --a-spec _,Y --b-spec Y,_ --out /tmp", "is a directory"},
        // Renaming a result over /dev/full (as root) once replaced the device with a regular file.
        {"matmul --a-spec _,Y --b-spec Y,_ --out /dev/full", "/dev/full: it exists and is not a regular file"},
        {"matmul --a-spec _,Y --b-spec Y,_ --out-dtype int8", "float32 or float64"},
        {"matmul --a-spec _,Y --b-spec Y,_ --out-dtype bfloat16",
         "numpy has no bfloat16 type, but float32 holds every bfloat16 value exactly, so use --out-dtype float32"},
        {"einsum bi,bj-\\>bij --specs _,_ _,_ --dims b=4,i=4,j=4 --out-spec _,_,_{X}", "no plan takes"},
        {"matmul --a-spec _,Y", "--b-spec is required"},
        {"matmul --a-spec _,Y --b-spec Y,_ --objective time", "--objective time needs --preset"},
        {"matmul --a-spec _,Y --b-spec Y,_ --objective speed", "--objective is 'speed'"},
        {"matmul --a-spec _,Y --b-spec Y,_ --preset tpu-v4", "--preset is only read with --objective time"},
        {"matmul --a-spec _,Y --b-spec Y,_ --objective time --preset tpu-v9", "tpu-v9"},
        {"matmul --a-spec _,Y --b-spec Y,_ --plan articles", "--plan is 'articles'"},
        {"einsum ik,kj --specs _,Y Y,_", "give --dims"},
        {"einsum ik,kj,jl --specs _,Y Y,_ --dims i=4", "exactly two"},
        {"einsum ik,kj --specs _,Y Y,_,_ --dims i=4,k=16,j=4", "einsum gives B 2 dims"},
        {"matmul --a-spec _,Y --b-spec Y,_ --mesh X=2,Y=4 --backend gpu", "backend 'gpu'"},
        {"matmull --a-spec _,Y --b-spec Y,_", "unknown command matmull"},
    };
    for (const auto& [args, says] : cases) {
      CAPTURE(args);
      const bool own_out = args.find("--out ") != std::string::npos;
      auto r = run_binary("shardlab " + args + (own_out ? "" : " --out " + c_out));
      CHECK(r.status == 2);
      CHECK(count_lines(r.err) == 1);
      CHECK(r.err.find(says) != std::string::npos);
      CHECK(r.out.empty());  // rejected before any part of the report
      CHECK_FALSE(exists(c_out));
    }
    struct stat st {};
    REQUIRE(::stat("/dev/full", &st) == 0);
    CHECK(S_ISCHR(st.st_mode));  // still the device
    for (const auto& p : {a_in, b_in}) std::remove(p.c_str());
  }

  TEST_CASE("shardlab matmul: .npy inputs whose product overflows the type are refused before anything runs") {
    const std::string a_in = temp("big_a.npy"), b_in = temp("big_b.npy");
    save_npy(a_in, Tensor(xt::ones<double>({4, 16}) * 1e30));  // each element of C: 16 x 1e60, past float32
    save_npy(b_in, Tensor(xt::ones<double>({16, 4}) * 1e30));
    auto r = run_binary("shardlab matmul --a-spec _,Y --b-spec Y,_ --a-in " + a_in + " --b-in " + b_in);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find("overflows float32 (some element of C rounds to inf)") != std::string::npos);
    // In float64 the same product (1.6e61) fits: it runs and passes.
    r = run_binary("shardlab matmul --dtype float64 --a-spec _,Y --b-spec Y,_ --a-in " + a_in + " --b-in " + b_in);
    CHECK(r.status == 0);
    // Large a times small b stays within range: not refused.
    save_npy(b_in, Tensor(xt::ones<double>({16, 4}) * 1e-30));
    r = run_binary("shardlab matmul --a-spec _,Y --b-spec Y,_ --a-in " + a_in + " --b-in " + b_in);
    CHECK(r.status == 0);
    for (const auto& p : {a_in, b_in}) std::remove(p.c_str());
  }
}
