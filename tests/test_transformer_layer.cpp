// harness/models/transformer_layer.cpp: the layer lessons 13 and 18 run is the program the shipped
// case files hold (a case file is checked on its own; a lesson must show the same layer).
#include <doctest/doctest.h>

#include "harness/check/case_file.hpp"
#include "harness/models/transformer_layer.hpp"
#include "harness/plan/program.hpp"

using namespace shardlab;

TEST_CASE("transformer layer: the same program as transformer_megatron.toml and transformer_sequence_parallel.toml") {
  const CaseFile mine = parse_case_file("name = \"l\"\nmesh = \"Y=4\"\n" + transformer_layer_text(), "l.toml");
  CHECK(mine.program.ops.size() == 32);
  CHECK(mine.backward);
  for (const char* path : {"harness/cases/transformer_megatron.toml", "harness/cases/transformer_sequence_parallel.toml"}) {
    CAPTURE(path);
    const CaseFile c = read_case_file(path);
    CHECK(program_text(c.program) == program_text(mine.program));
    CHECK(c.program.inputs == mine.program.inputs);
    CHECK(c.backward);
  }
  // A different layer is told apart: the FFN's gelu replaced.
  std::string text = transformer_layer_text();
  text.replace(text.find("\"gelu\""), 6, "\"relu\"");
  const CaseFile other = parse_case_file("name = \"l\"\nmesh = \"Y=4\"\n" + text, "l.toml");
  CHECK(program_text(other.program) != program_text(mine.program));
}
