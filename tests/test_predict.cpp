// collectives/predict.cpp against numbers worked out by hand (see the comments).
#include <doctest/doctest.h>

#include <string>

#include "collectives/predict.hpp"
#include "core/error.hpp"

using namespace shardlab;

TEST_CASE("predicted bytes: all_gather sends n-1 blocks") {
  CHECK(predicted_bytes_sent("all_gather", 4, 32, 8) == 96);    // 3 blocks of 32 B = 3/4 of 128 B
  CHECK(predicted_bytes_sent("all_gather", 8, 8, 8) == 56);     // 7 of 8 doubles
  CHECK(predicted_bytes_sent("all_gather", 2, 1024, 8) == 1024);
}

TEST_CASE("predicted bytes: reduce_scatter and all_to_all send (n-1)/n of the input") {
  CHECK(predicted_bytes_sent("reduce_scatter", 4, 128, 8) == 96);
  CHECK(predicted_bytes_sent("reduce_scatter", 2, 64, 8) == 32);
  CHECK(predicted_bytes_sent("all_to_all", 8, 512, 8) == 448);
  CHECK(predicted_bytes_sent("all_to_all", 4, 96, 8) == 72);
}

TEST_CASE("predicted bytes: all_reduce with even chunks is 2(n-1)/n of the input") {
  CHECK(predicted_bytes_sent("all_reduce", 4, 128, 8) == 192);  // 16 doubles: 2*16 - 4 - 4 = 24 doubles
  CHECK(predicted_bytes_sent("all_reduce", 8, 512, 8) == 896);  // 64 doubles: 2*7/8 * 64 = 112 doubles
  CHECK(predicted_bytes_sent("all_reduce", 2, 16, 8) == 16);    // 2 doubles: send 1, then 1
}

TEST_CASE("predicted bytes: all_reduce with uneven chunks is the largest sender") {
  // Member r sends 2e - chunk(r) - chunk(r+1) elements; chunks: the first e%n get one more.
  // e=5, n=4: chunks 2,1,1,1 -> r=0: 10-2-1=7, r=1: 8, r=2: 8, r=3: 10-1-2=7 -> 8 doubles
  CHECK(predicted_bytes_sent("all_reduce", 4, 40, 8) == 64);
  // e=6, n=4: chunks 2,2,1,1 -> 8, 9, 10, 9 -> 10 doubles
  CHECK(predicted_bytes_sent("all_reduce", 4, 48, 8) == 80);
  // e=7, n=3: chunks 3,2,2 -> 9, 10, 9 -> 10 doubles
  CHECK(predicted_bytes_sent("all_reduce", 3, 56, 8) == 80);
  // e=3, n=8: chunks 1,1,1,0,0,0,0,0 -> r=3: 6-0-0 = 6 doubles
  CHECK(predicted_bytes_sent("all_reduce", 8, 24, 8) == 48);
  // floats: e=3, n=2: chunks 2,1 -> 3 floats each
  CHECK(predicted_bytes_sent("all_reduce", 2, 12, 4) == 12);
}

TEST_CASE("predicted bytes by member: all_reduce's members send different amounts when n does not divide e") {
  // e=6, n=4 (chunks 2,2,1,1): by hand 2e - chunk(r) - chunk(r+1) = 8, 9, 10, 9 doubles.
  const std::size_t want[] = {64, 72, 80, 72};
  for (int r = 0; r < 4; ++r) CHECK(predicted_bytes_sent_by("all_reduce", 4, 48, 8, r) == want[r]);
  // 16 floats over 3 (chunks 6,5,5): 21, 22, 21 floats.
  CHECK(predicted_bytes_sent_by("all_reduce", 3, 64, 4, 0) == 84);
  CHECK(predicted_bytes_sent_by("all_reduce", 3, 64, 4, 1) == 88);
  CHECK(predicted_bytes_sent_by("all_reduce", 3, 64, 4, 2) == 84);
  // Other ops: the same from every member.
  CHECK(predicted_bytes_sent_by("reduce_scatter", 4, 128, 8, 3) == 96);
}

TEST_CASE("predicted bytes: a group of one sends nothing") {
  for (const char* op : {"all_gather", "reduce_scatter", "all_reduce", "all_to_all"}) {
    CHECK(predicted_bytes_sent(op, 1, 800, 8) == 0);
    CHECK(predicted_messages(op, 1) == 0);
  }
}

TEST_CASE("predicted messages") {
  CHECK(predicted_messages("all_gather", 8) == 7);
  CHECK(predicted_messages("reduce_scatter", 4) == 3);
  CHECK(predicted_messages("all_to_all", 2) == 1);
  CHECK(predicted_messages("all_reduce", 8) == 14);
  CHECK(predicted_messages("all_reduce", 2) == 2);
}

TEST_CASE("predicted bytes: an unknown collective is an unsupported error naming it") {
  try {
    predicted_bytes_sent("broadcast", 4, 64, 8);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::unsupported);
    CHECK(std::string(e.what()).find("'broadcast'") != std::string::npos);
  }
}
