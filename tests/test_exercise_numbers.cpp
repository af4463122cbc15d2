// harness/models/exercise_numbers.cpp: every number exercise's right values against the code the
// lessons run (core/layout.hpp's blocks, pipeline.hpp's formulas, which test_pipeline holds to the
// simulated schedules, ring attention's and the MoE's byte counts), variants that change the
// answer, and grading of the forms a learner types.
#include <doctest/doctest.h>

#include <set>

#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/text.hpp"
#include "core/mesh.hpp"
#include "harness/models/exercise_numbers.hpp"
#include "harness/models/moe.hpp"
#include "harness/models/pipeline.hpp"
#include "harness/models/ring_attention.hpp"

using namespace shardlab;

namespace {
std::size_t size(const NumberExercise& e, const char* key) { return static_cast<std::size_t>(e.sizes.at(key)); }
std::string range(std::size_t a, std::size_t b) { return std::to_string(a) + ":" + std::to_string(b); }
}  // namespace

TEST_CASE("number exercises: right values equal what the lessons' code computes, every variant") {
  for (int v = 0; v < 6; ++v) {
    CAPTURE(v);
    const NumberExercise b = number_exercise("01", 0, v, "01.1");
    const Block blk = block_of(Mesh::parse(b.mesh), Spec::parse(b.spec), {size(b, "rows"), size(b, "cols")},
                               static_cast<int>(size(b, "device")));
    CHECK(b.right == std::vector<std::string>{range(blk.start[0], blk.stop[0]), range(blk.start[1], blk.stop[1])});
    const NumberExercise c = number_exercise("01", 1, v, "01.2");
    const Mesh mesh = Mesh::parse(c.mesh);
    std::set<std::string> blocks;
    for (int d = 0; d < mesh.devices(); ++d)
      blocks.insert(block_of(mesh, Spec::parse(c.spec), {size(c, "rows"), size(c, "cols")}, d).text());
    CHECK(c.right[0] == std::to_string(blocks.size()));
    CHECK(c.right[1] == std::to_string(mesh.devices() / static_cast<int>(blocks.size())));

    const NumberExercise p = number_exercise("16", 0, v, "16.1");
    const int P = int(size(p, "P")), m = int(size(p, "m")), s = int(size(p, "stage"));
    CHECK(std::stod(p.right[0].substr(0, p.right[0].find('/'))) / std::stod(p.right[0].substr(p.right[0].find('/') + 1)) ==
          doctest::Approx(bubble_formula(P, m)));
    CHECK(p.right[1] == std::to_string(stash_formula(PipeSchedule::gpipe, P, m, s)));
    CHECK(p.right[2] == std::to_string(stash_formula(PipeSchedule::one_f_one_b, P, m, s)));
    const NumberExercise q = number_exercise("16", 1, v, "16.2");
    PipelineConfig pc;
    pc.stages = int(size(q, "P"));
    pc.chunks = int(size(q, "m"));
    pc.virtual_stages = int(size(q, "v"));
    pc.schedule = PipeSchedule::interleaved;
    CHECK(q.right[1] == std::to_string(messages_formula(pc, int(size(q, "stage")))));

    const NumberExercise r = number_exercise("19", 0, v, "19.4");
    RingConfig rc;
    rc.devices = int(size(r, "n"));
    rc.head = size(r, "d");
    rc.chunk = size(r, "S") / (2 * rc.devices);
    CHECK(r.right[1] == std::to_string(ring_forward_bytes(rc, size(r, "element_bytes"))));
    CHECK(r.right[2] == std::to_string(ring_backward_bytes(rc, size(r, "element_bytes"))));

    const NumberExercise x = number_exercise("20", 0, v, "20.4");
    MoeShape ms;
    ms.experts = int(size(x, "experts"));
    ms.top_k = int(size(x, "top_k"));
    ms.capacity_factor = x.sizes.at("factor");
    ms.model = size(x, "m");
    const std::size_t cap = moe_capacity(ms, size(x, "tokens"));
    CHECK(x.right[0] == std::to_string(cap));
    CHECK(x.right[1] == std::to_string(moe_all_to_all_bytes(ms, cap, int(size(x, "n")), size(x, "element_bytes"))));
    for (const NumberExercise* e : {&b, &c, &p, &q, &r, &x})
      for (const std::string& line : split(e->question, '\n')) CHECK(line.size() <= 100);
  }
}

TEST_CASE("number exercises: the forms a learner types, and what is graded wrong") {
  const NumberExercise p = number_exercise("16", 0, 0, "16.1");  // 2 stages, 4 micro-batches, stage 0
  REQUIRE(number_answer_text(p) == "bubble 1/5; stash_gpipe 4; stash_1f1b 2");
  CHECK(grade_numbers(p, parse_number_answer("bubble 1/5; stash_gpipe 4; stash_1f1b 2")).pass());
  CHECK(grade_numbers(p, parse_number_answer("stash_1f1b=2\nbubble 0.2\nstash_gpipe 4")).pass());
  CHECK(grade_numbers(p, parse_number_answer("bubble 2/10; stash_gpipe 4; stash_1f1b 2")).pass());
  NumberGrade g = grade_numbers(p, parse_number_answer("bubble 1/4; stash_gpipe 4"));
  CHECK_FALSE(g.pass());
  CHECK(g.wrong == 1);
  CHECK(g.missed == 1);
  CHECK(g.lines[0].find("wrong: it is 1/5") != std::string::npos);
  g = grade_numbers(p, parse_number_answer("bubble 1/5; stash_gpipe 4; stash_1f1b 2; stash_1f1b 2"));
  CHECK_FALSE(g.pass());  // named twice
  CHECK_FALSE(grade_numbers(p, {}).pass());
  CHECK_FALSE(grade_numbers(p, parse_number_answer("bubble 1/5; stash_gpipe 4; stash_1f1b 2; extra 1")).pass());
  const NumberExercise b = number_exercise("01", 0, 0, "01.1");
  CHECK(grade_numbers(b, parse_number_answer(number_answer_text(b))).pass());
  for (const char* bad : {"bubble", "bubble 1/5 2", "rows -1:4", "1 2", "bubble one"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_number_answer(bad), Error);
  }
}
