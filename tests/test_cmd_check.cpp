// harness/cli/cmd_check.cpp and harness/check/junit.cpp: `shardlab check` over the shipped cases
// passes; one case with a byte budget too small makes exit 1 and exactly one <failure> in the
// JUnit file (read back with pugixml, a JUnit reader's view); an invalid file is an <error>, exit 2,
// and the other files still run.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include <pugixml.hpp>

#include "core/text.hpp"
#include "harness/check/junit.hpp"
#include "tests/run_binary.hpp"
#include "tests/verdict_powers.hpp"

using shardlab::testing::count_lines;
using shardlab::testing::run_binary;

namespace {

std::string temp_dir() {
  static int n = 0;
  const std::string d = "/tmp/shardlab_check_" + std::to_string(::getpid()) + "_" + std::to_string(n++);
  ::mkdir(d.c_str(), 0755);
  return d;
}

void write_variant(const std::string& path, const std::string& from, const std::string& to) {
  std::string text = shardlab::read_text_file("harness/cases/gspmd_ffn.toml", "case");
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  std::ofstream(path) << text;
}

int count(const pugi::xml_document& doc, const char* xpath) {
  return static_cast<int>(doc.select_nodes(xpath).size());
}

}  // namespace

TEST_CASE("shardlab check: the shipped cases pass, one line each and a count") {
  const std::string junit = temp_dir() + "/junit.xml";
  const auto r = run_binary("shardlab check harness/cases --junit " + junit);
  CAPTURE(r.out);
  CHECK(r.status == 0);
  for (const std::string name : {"gspmd_ffn", "column_ffn", "row_ffn", "pairwise_ffn", "row_column_ffn", "data_ffn"}) {
    CHECK_MESSAGE(r.out.find("PASS " + name + ": ") != std::string::npos, name);
    CHECK_MESSAGE(r.out.find("PASS " + name + "_backward: ") != std::string::npos, name);
  }
  for (const std::string name :
       {"attention_megatron", "attention_fused_qkv", "attention_gspmd", "attention_sequence", "attention_ring_step", "transformer_gspmd",
        "transformer_megatron", "transformer_sequence_parallel"})
    CHECK_MESSAGE(r.out.find("PASS " + name + ": ") != std::string::npos, name);
  // At the article's sizes: planned, never run (plan_only = true), its expected collectives held to the plan.
  CHECK(r.out.find("PASS esm2_layer: 14 collectives, 660799488 B/device, 1 checks (planned, not run)") !=
        std::string::npos);
  CHECK(r.out.find("PASS attention_12_heads: 2 collectives, 1792 B/device") != std::string::npos);  // uneven heads
  CHECK(shardlab::testing::verdicts_without_power(r.out).empty());  // each line with its weakest check's power
  CHECK(r.out.find("PASS nested_4x4_embedding_softmax: 7 collectives, 2304 B/device") != std::string::npos);
  CHECK(r.out.find("PASS softmax_padded_sequence: 3 collectives, 204 B/device") != std::string::npos);  // pad
  // s = sum over m of relu(x[b_X, m_Y]): one AllReduce over Y of s's 4-float block, as DTensor.
  CHECK(r.out.find("PASS dtensor_relu_sum: 1 collective, 24 B/device") != std::string::npos);
  // Uneven chunks: an AllToAll whose devices send and receive different counts, an AllGather of
  // unequal neighbouring parts, bytes as the case's comment derives them.
  CHECK(r.out.find("PASS uneven_chunk_moves: 2 collectives, 56 B/device") != std::string::npos);
  CHECK(r.out.find("PASS padded_unary_ops: 16 collectives, 256 B/device, 19 checks") != std::string::npos);
  CHECK(r.out.find("28 passed, 0 failed") != std::string::npos);
  pugi::xml_document doc;
  REQUIRE(doc.load_file(junit.c_str()));
  CHECK(count(doc, "/testsuites/testsuite") == 28);
  CHECK(count(doc, "//failure") == 0);
  // FFN forward: y, the ledger, 2 expectations, memory. Backward adds dx, dW_in, dW_out against
  // the unsharded program and each against central differences. Attention (backward): y and the
  // gradients of its 5 inputs (6 with x_keys), each also against central differences, the ledger,
  // its expectations (1 or 2) and memory; attention_ring_step as attention_sequence.
  // The two layers: y and 11 gradients, each gradient against central differences, the ledger, an
  // expectation, memory; the sequence-parallel layer two expectations (collectives and bytes).
  // The ESM2 layer: its one expectation, against the plan.
  CHECK(count(doc, "//testcase") ==
        6 * 5 + 6 * 11 + (6 + 5 + 1 + 1 + 1) * 2 + 2 * (7 + 6 + 1 + 2 + 1) + 2 * (12 + 11 + 1 + 1 + 1) +
            (12 + 11 + 1 + 2 + 1) + 1 + (6 + 5 + 1 + 2 + 1) +  // 12 heads on Y=8, two expectations
            (1 + 3 + 3 + 1 + 1 + 1) +  // nested 4x4: p, 3 gradients and their central differences, ledger, bytes, memory
            (4 + 3 + 1 + 1 + 1) +      // fused QKV: y, 3 gradients, their central differences, ledger, expectation, memory
            (2 + 2 + 2 + 1 + 2 + 1 + 1) +  // padded sequence: z, p, 2 gradients and their central differences, ledger, 2 expectations, memory, padding
            5 +                        // DTensor's relu then sum: s, the ledger, 2 expectations, memory
            3 +                        // the ring step's v_at (the ring's direction), dpos and its central differences
            (16 + 1 + 1 + 1) +         // every unary op padded: 16 contractions, ledger, padding, memory
            (2 + 1 + 2 + 1) +          // uneven chunks: p, q, ledger, 2 expectations, memory
            (1 + 1 + 1 + 1));          // the max over a split dim: mx, ledger, expectation, memory
  CHECK(count(doc, "//testcase[@name='dW_in vs central differences']") == 6 + 3);  // FFNs, layers
  // Every comparison of values carries its power and floor; no shipped case has a WEAK check.
  const auto powers = doc.select_nodes("//testcase/properties/property[@name='power']");
  CHECK(powers.size() >= 60);
  for (const auto& p : powers) {
    const double power = std::stod(p.node().attribute("value").value());
    const double floor = std::stod(p.node().next_sibling("property").attribute("value").value());
    CAPTURE(p.node().parent().parent().attribute("name").value());
    CHECK(power <= floor);
  }
}

TEST_CASE("shardlab check: one failing expectation is one JUnit failure and exit 1; an invalid file is exit 2") {
  const std::string dir = temp_dir();
  write_variant(dir + "/small.toml", "max_bytes_per_device = 8192", "max_bytes_per_device = 2000");
  write_variant(dir + "/ok.toml", "name = \"gspmd_ffn\"", "name = \"ok\"");
  const auto r = run_binary("shardlab check " + dir + " --junit " + dir + "/junit.xml");
  CHECK(r.status == 1);
  CHECK(r.out.find("1 passed, 1 failed") != std::string::npos);
  pugi::xml_document doc;
  REQUIRE(doc.load_file((dir + "/junit.xml").c_str()));
  CHECK(count(doc, "//failure") == 1);
  CHECK(count(doc, "//error") == 0);
  const auto failure = doc.select_node("//failure").node();
  CHECK(std::string(failure.parent().attribute("name").value()) == "expect.max_bytes_per_device");
  CHECK(std::string(failure.attribute("message").value()).find("2560 bytes per device") != std::string::npos);

  write_variant(dir + "/typo.toml", "op = \"gelu\"", "op = \"gelo\"");
  const auto bad = run_binary("shardlab check " + dir + " --junit " + dir + "/junit.xml");
  CHECK(bad.status == 2);
  CHECK(bad.out.find("1 passed, 1 failed, 1 invalid") != std::string::npos);
  CHECK(bad.out.find("ERROR " + dir + "/typo.toml: op 2 (g = gelo, line 12)") != std::string::npos);
  pugi::xml_document again;
  REQUIRE(again.load_file((dir + "/junit.xml").c_str()));
  CHECK(count(again, "//error") == 1);
  CHECK(count(again, "//failure") == 1);
}

TEST_CASE("shardlab run: a case whose unsharded program overflows its element type says so, not just 'nan'") {
  const std::string dir = temp_dir();
  std::string text = shardlab::read_text_file("harness/cases/attention_megatron.toml", "case");
  const auto at = text.find("value = 0.5");
  REQUIRE(at != std::string::npos);
  text.replace(at, 11, "value = 1e308");
  std::ofstream(dir + "/big.toml") << text;
  const auto r = run_binary("shardlab run " + dir + "/big.toml");
  CHECK(r.status == 1);
  CHECK(shardlab::testing::flat(r.out).find("the unsharded program's y overflows float32 (it holds inf or NaN); nothing is checked") !=
        std::string::npos);
}

TEST_CASE("shardlab check: a JUnit path that cannot be written is refused before anything runs") {
  for (const std::string path : {"/dev/full", "/nonexistent/dir/j.xml", "/tmp"}) {
    CAPTURE(path);
    const auto r = run_binary("shardlab check harness/cases --junit " + path);
    CHECK(r.status == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.out.empty());
  }
  struct stat st {};
  REQUIRE(::stat("/dev/full", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));  // still the device, not a file put in its place
  CHECK(run_binary("shardlab check").status == 2);
}

TEST_CASE("junit_xml: escapes what XML needs escaped") {
  shardlab::JunitSuite s{"a<b>.toml", {{"x & y", false, false, "got \"1\" < 2", 0}}, 0};
  pugi::xml_document doc;
  REQUIRE(doc.load_string(shardlab::junit_xml({s}).c_str()));
  CHECK(std::string(doc.select_node("//failure").node().attribute("message").value()) == "got \"1\" < 2");
  CHECK(std::string(doc.select_node("//testsuite").node().attribute("name").value()) == "a<b>.toml");
}
