// Lesson 17: DP + PP + TP with ZeRO-1 on D=2,P=2,T=2: one Adam step equal to the unsharded model's,
// bytes per axis equal their formulas, tensor parallelism cheaper inside a node at GPT-3's size,
// ZeRO-2's per-micro-batch ReduceScatters measured against ZeRO-1's, text that follows --mesh, and
// a mesh the hidden width and the shards' rows do not divide (--uneven chunk and pad).
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/run_binary.hpp"

using shardlab::testing::flat;
using shardlab::testing::run_binary;

TEST_SUITE("lessons") {
  TEST_CASE("lesson 17 (3D) --json: PASS, bytes by axis, TP inside a node modeled cheaper") {
    auto r = run_binary("17_3d_parallelism --json");
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["pass"] == true);
    // float32 blocks of [2, 8] = 64 B. T: a stage-1 device all-reduces 2 chunks forward and 2
    // back over 2 devices, each sending 2(2-1)/2 x 64 = 64 B: 256. P: 2 chunks x 64 B = 128.
    // D: ReduceScatter + AllGather of W1 [8, 8] and W2 [8, 8] shards: 2 x 1/2 x 128 x 4 = 512.
    CHECK(j["bytes_T"] == 256);
    CHECK(j["bytes_P"] == 128);
    CHECK(j["bytes_D"] == 512);
    CHECK(j["modeled_s_gpt3_tp_inside"] < j["modeled_s_gpt3_tp_across"]);
    CHECK(run_binary("17_3d_parallelism --inject perturb:1e-3 --quiet").status == 1);
    CHECK(run_binary("17_3d_parallelism --mesh X=8").status == 2);
  }

  TEST_CASE("lesson 17: ZeRO-2 reduce-scatters every micro-batch's gradient, (m+1)/2 times ZeRO-1's bytes over D") {
    auto r = run_binary("17_3d_parallelism --json");
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    // ZeRO-1: one ReduceScatter and one AllGather of 2 x [8, 8] float32 (512 B) over D = 2: 512 B.
    // ZeRO-2: m = 2 ReduceScatters and the AllGather: 3 x 1/2 x 512 = 768 B.
    CHECK(j["zero1_d_bytes"] == 512);
    CHECK(j["zero2_d_bytes"] == 768);
    // At GPT-3's size with 32 micro-batches the ratio is 33/2 in bytes, more in messages.
    CHECK(j["modeled_s_gpt3_zero2_d"].get<double>() > 16 * j["modeled_s_gpt3_zero1_d"].get<double>());
    const auto text = run_binary("17_3d_parallelism");
    CHECK(text.out.find("ZeRO-2: owned step-1 gradient rows = whole batch's: PASS") != std::string::npos);
    CHECK(flat(text.out).find("1.5 with this run's m = 2, 16.5 with the article's 32 micro-batches") != std::string::npos);
  }

  TEST_CASE("lesson 17: the text follows --mesh, and says which placement this run's numbers favour") {
    for (const char* mesh : {"D=2,P=2,T=2", "D=4,P=2,T=2", "D=2,P=4,T=2"}) {
      CAPTURE(mesh);
      const auto r = run_binary(std::string("17_3d_parallelism --mesh ") + mesh);
      REQUIRE(r.status == 0);
      const auto j = nlohmann::json::parse(run_binary(std::string("17_3d_parallelism --json --mesh ") + mesh).out);
      const std::string text = flat(r.out), m = mesh;
      const std::string split = m.substr(2, 1) + "x" + m.substr(6, 1) + "x" + m.substr(10, 1);
      CHECK(text.find("same " + split + " split of GPT-3") != std::string::npos);
      if (split != "2x2x2") CHECK(text.find("2x2x2") == std::string::npos);
      CHECK((text.find("both stages") != std::string::npos) == (m.substr(6, 1) == "2"));
      if (m.substr(6, 1) == "4") CHECK(text.find("all 4 stages") != std::string::npos);
      // The sentence under the table agrees with the two tables: this run's axis and GPT-3's.
      const bool agree = j["run_keep_inside"] == j["gpt3_keep_inside"];
      CHECK((text.find("This run agrees") != std::string::npos) == agree);
      CHECK((text.find("ranks the axes otherwise") != std::string::npos) == !agree);
      CHECK(j["gpt3_keep_inside"] == "T");
      const bool inside_cheaper = j["modeled_us_tp_inside"] <= j["modeled_us_tp_across"];
      if (split == "4x2x2") CHECK_FALSE(inside_cheaper);  // 12 small D messages against 8 over T
    }
  }

  TEST_CASE("lesson 17: GPT-3's model follows the mesh in every term, and the advice follows the model") {
    // An axis moves bytes at GPT-3's size exactly when it moves bytes in this run's ledger.
    const struct {
      const char* mesh;
      const char* keep;
    } meshes[] = {{"D=2,P=1,T=4", "T"}, {"D=4,P=2,T=1", "D"}, {"D=1,P=2,T=4", "T"}, {"D=8,P=1,T=1", "D"},
                  {"D=1,P=8,T=1", "P"}};
    for (const auto& m : meshes) {
      CAPTURE(m.mesh);
      const auto r = run_binary(std::string("17_3d_parallelism --json --mesh ") + m.mesh);
      REQUIRE(r.status == 0);
      const auto j = nlohmann::json::parse(r.out);
      for (const char* axis : {"T", "P", "D"}) {
        CAPTURE(axis);
        CHECK((j[std::string("bytes_") + axis].get<double>() > 0) == (j[std::string("gpt3_bytes_") + axis].get<double>() > 0));
      }
      CHECK(j["gpt3_keep_inside"] == m.keep);
      const std::string text = flat(run_binary(std::string("17_3d_parallelism --mesh ") + m.mesh).out);
      // With T = 1 nothing is concluded about tensor parallelism.
      CHECK((text.find("no tensor parallelism to place") != std::string::npos) == (std::string(m.mesh).find("T=1") != std::string::npos));
      CHECK((text.find("'TP inside a node' holds") != std::string::npos) == (std::string(m.keep) == "T"));
      CHECK(text.find("does not hold") == std::string::npos);
    }
    // The 2x1x4 split by hand: T all-reduces 4 times a layer (96 layers, one stage) for 32
    // micro-batches of 8 x 2048 x 12288 bfloat16 (402,653,184 B), sending 2(4-1)/4 of each.
    const auto j = nlohmann::json::parse(run_binary("17_3d_parallelism --json --mesh D=2,P=1,T=4").out);
    CHECK(j["gpt3_bytes_T"].get<double>() == doctest::Approx(32.0 * 96 * 4 * 1.5 * 402653184));
    CHECK(j["gpt3_bytes_P"] == 0);
  }

  TEST_CASE("lesson 17: article 004's other reasons for ZeRO-1, PP's 1/PP of the gradients and ZeRO-3's traffic") {
    const auto r = run_binary("17_3d_parallelism --json");
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    // GPT-3: 12 h^2 x 96 weights, 2 B each; on P = 2, T = 2 a device holds a quarter, and ZeRO-2
    // over D = 2 would save half of that.
    const double grads = 12.0 * 12288 * 12288 * 96 * 2 / 1e9;
    CHECK(j["gpt3_grads_here_gb"].get<double>() == doctest::Approx(grads / 4));
    CHECK(j["gpt3_zero2_saves_gb"].get<double>() == doctest::Approx(grads / 8));
    // ZeRO-3 gathers the weights for each micro-batch's forward and backward and scatters each
    // gradient: 3m = 96 collectives of the shard against ZeRO-1's 2.
    CHECK(j["gpt3_zero3_d_bytes"].get<double>() == doctest::Approx(48 * j["gpt3_zero1_d_bytes"].get<double>()));
    CHECK(j["modeled_s_gpt3_zero3_d"].get<double>() > j["modeled_s_gpt3_zero2_d"].get<double>());
    const std::string text = flat(run_binary("17_3d_parallelism").out);
    CHECK(text.find("a device holds 1/(P T) = 1/4 of GPT-3's 348 GB of bfloat16 gradients, 87.0 GB") != std::string::npos);
    CHECK(text.find("3m = 96 collectives of the shard a step, 48 times ZeRO-1's bytes") != std::string::npos);
  }

  TEST_CASE("lesson 17: article 002's nested 4x4 mesh run as one model on 16 devices with its assignment of axes") {
    const auto r = run_binary("17_3d_parallelism");
    REQUIRE(r.status == 0);
    for (const char* line : {"     build/bin/shardlab nested\n", "     build/bin/17_3d_parallelism --mesh D=4,P=4,T=1\n",
                             "   nested 4x4: encoded: PASS (exact, no tolerance)\n",
                             "   nested 4x4: bytes per part, every device = the formulas: PASS"})
      CHECK_MESSAGE(r.out.find(line) != std::string::npos, line);
    // The relayouts and the encoder, float32, by hand (tests/test_nested.cpp derives each): 4 tokens of
    // 8 elements a device and micro-batch, 128 B; the last stage returns 3 of them; 3 x 2 x 4 x 2
    // slots x 8 elements x 4 B of AllToAlls over Y.
    const auto j = nlohmann::json::parse(run_binary("17_3d_parallelism --json").out);
    CHECK(j["bytes_to_stages"] == 128);
    CHECK(j["bytes_to_batch"] == 384);
    CHECK(j["bytes_encoder_experts"] == 3072);
    const auto decoder = run_binary("17_3d_parallelism --mesh D=4,P=4,T=1 --json");
    CHECK(decoder.status == 0);
    CHECK(decoder.out.find("\"pass\": true") != std::string::npos);
  }

  TEST_CASE("lesson 17 --uneven: hidden 16 on T=3 and 8 rows on D=3 verify both ways, bytes by the ring's parts") {
    // By hand, float32. T: a stage-1 device all-reduces [2, 8] = 16 floats over 3 four times; the
    // ring's chunks are 6, 5, 5, so member 1 sends 2*16 - 5 - 5 = 22 floats: 4 x 88 = 352 B.
    // D, chunk: device (d=1, t=0) holds W1[:, 0:6] (rows of 24 B, cut 3, 3, 2 over D) and W2[0:6, :]
    // (rows of 32 B, 2 each): ReduceScatter sends all parts but its own, AllGather all but its
    // successor's: (192 - 72) + (192 - 48) + (192 - 64) + (192 - 64) = 520 B, the most of any device.
    // The last device (d=2, t=2) holds 4 columns: (128 - 32) + (128 - 48) + (128 - 0) + (128 - 64) = 368.
    // D, pad: every device stores 6 columns (2 of padding on t=2) and 3 W1 rows (1 of padding on
    // d=2), parts of 72 and 64 B: (216 - 72) x 2 + (192 - 64) x 2 = 544 B on every device.
    const struct {
      const char* mode;
      double d_most, zero1_last;
    } runs[] = {{"chunk", 520, 368}, {"pad", 544, 544}};
    for (const auto& u : runs) {
      CAPTURE(u.mode);
      const auto r = run_binary(std::string("17_3d_parallelism --mesh D=3,P=2,T=3 --json --uneven ") + u.mode);
      REQUIRE(r.status == 0);
      const auto j = nlohmann::json::parse(r.out);
      CHECK(j["pass"] == true);
      CHECK(j["bytes_T"] == 352);
      CHECK(j["bytes_P"] == 128);
      CHECK(j["bytes_D"] == u.d_most);
      CHECK(j["zero1_d_bytes"] == u.zero1_last);
    }
    // The roles table shows the real columns, and under pad the padding.
    const auto chunk = run_binary("17_3d_parallelism --mesh D=3,P=2,T=3");
    CHECK(chunk.out.find("W1[:, 12:16], W2[12:16, :]") != std::string::npos);
    CHECK(chunk.out.find("W1 rows 6:8, W2 rows 4:4") != std::string::npos);
    const auto pad = run_binary("17_3d_parallelism --mesh D=3,P=2,T=3 --uneven pad");
    CHECK(pad.out.find("W1[:, 12:16+2], W2[12:16+2, :]") != std::string::npos);
    // Device 14 (d=2, t=2) owns W2 shard rows 4:6, which under pad are T's padding (its 4 real
    // hidden rows are 0:4): shown as 0 real rows and 2 of padding.
    CHECK(pad.out.find("W1 rows 6:8+1, W2 rows 4:4+2") != std::string::npos);
    // Uneven parts: ZeRO-2's bytes over D are not (m+1)/2 times ZeRO-1's on every device: 592 / 368.
    CHECK(flat(chunk.out).find("keeping about 1/3 of them") != std::string::npos);
    CHECK(flat(chunk.out).find("the last device's ratio is its own: 1.61.") != std::string::npos);
    // A planted wrong update is caught on the uneven mesh too; --uneven none refuses in a sentence.
    CHECK(run_binary("17_3d_parallelism --mesh D=3,P=2,T=3 --inject skip-update --quiet").status == 1);
    const auto none = run_binary("17_3d_parallelism --mesh D=3,P=2,T=3 --uneven none");
    CHECK(none.status == 2);
    CHECK(none.err.find("use --uneven chunk or pad") != std::string::npos);
  }
}
