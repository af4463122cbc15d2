// collectives/ledger.cpp: call stamping and the line-based serialize / deserialize round trip.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "collectives/ledger.hpp"
#include "core/error.hpp"

using namespace shardlab;

namespace {
LedgerRow row(int device, const std::string& op, const std::string& axes, const std::string& tensor) {
  LedgerRow r;
  r.device = device;
  r.op = op;
  r.axes = axes;
  r.tensor = tensor;
  return r;
}

void check_equal(const LedgerRow& a, const LedgerRow& b) {
  CHECK(a.device == b.device);
  CHECK(a.call == b.call);
  CHECK(a.op == b.op);
  CHECK(a.axes == b.axes);
  CHECK(a.tensor == b.tensor);
  CHECK(a.algorithm == b.algorithm);
  CHECK(a.group_size == b.group_size);
  CHECK(a.input_bytes == b.input_bytes);
  CHECK(a.output_bytes == b.output_bytes);
  CHECK(a.messages == b.messages);
  CHECK(a.bytes_sent == b.bytes_sent);
  CHECK(a.bytes_received == b.bytes_received);
  CHECK(a.seconds == b.seconds);  // bit for bit: 17 significant digits round-trip a double
  CHECK(a.start_us == b.start_us);
  CHECK(a.peer == b.peer);
  CHECK(a.modeled == b.modeled);
}
}  // namespace

TEST_CASE("Ledger::add numbers calls in order and clear empties it") {
  Ledger l;
  LedgerRow r = row(3, "all_gather", "Y", "A");
  r.call = 42;  // overwritten
  l.add(r);
  l.add(row(3, "all_reduce", "X,Y", "B"));
  l.add(row(3, "all_to_all", "X", "C"));
  REQUIRE(l.rows().size() == 3u);
  CHECK(l.rows()[0].call == 0);
  CHECK(l.rows()[1].call == 1);
  CHECK(l.rows()[2].call == 2);
  CHECK(l.rows()[1].op == "all_reduce");
  CHECK(l.rows()[2].tensor == "C");
  l.clear();
  CHECK(l.rows().empty());
  l.add(row(0, "x", "", ""));
  CHECK(l.rows()[0].call == 0);
}

TEST_CASE("ledger serialize writes one line per row") {
  LedgerRow r = row(3, "all_gather", "X,Y", "A");
  r.call = 1;
  r.algorithm = "ring";
  r.group_size = 8;
  r.input_bytes = 64;
  r.output_bytes = 512;
  r.messages = 7;
  r.bytes_sent = 448;
  r.bytes_received = 448;
  r.seconds = 0.5;
  CHECK(serialize({r}) == "3 1 all_gather X,Y A ring 8 8 64 512 7 448 448 0.5 0 -1 0\n");
  r.axes = "";
  r.modeled = true;
  CHECK(serialize({r}) == "3 1 all_gather - A ring 8 8 64 512 7 448 448 0.5 0 -1 1\n");
  CHECK(serialize({}) == "");
}

TEST_CASE("ledger serialize / deserialize round trip") {
  std::vector<LedgerRow> rows;
  LedgerRow a = row(0, "all_gather", "X,Y", "A");
  a.algorithm = "ring";
  a.group_size = 8;
  a.input_bytes = 64;
  a.output_bytes = 512;
  a.messages = 7;
  a.bytes_sent = 448;
  a.bytes_received = 448;
  a.seconds = 0.1234567890123456789;
  a.start_us = 1234567890123.456;  // a monotonic clock's microseconds: 17 digits survive
  rows.push_back(a);
  LedgerRow b = row(7, "all_reduce", "", "partial_C");  // empty axes: a collective over no axes
  b.call = 5;
  b.algorithm = "native";
  b.group_size = 1;
  b.input_bytes = 5000000000ULL;  // above 2^32
  b.output_bytes = 5000000000ULL;
  b.messages = 0;
  b.bytes_sent = 0;
  b.bytes_received = 0;
  b.seconds = 1e-9 / 3;
  b.modeled = true;
  b.peer = 2;  // a send's or receive's other device
  rows.push_back(b);
  LedgerRow c;  // all defaults, every text field empty
  rows.push_back(c);

  const std::string text = serialize(rows);
  const std::vector<LedgerRow> back = deserialize(text);
  REQUIRE(back.size() == rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CAPTURE(i);
    check_equal(back[i], rows[i]);
  }
  CHECK(serialize(back) == text);
  CHECK(deserialize("").empty());
  CHECK(deserialize("\n\n").empty());
}

TEST_CASE("ledger deserialize rejects malformed lines") {
  for (const std::string bad : {"3 1 all_gather X A ring 8 64 512 7 448 448 0.5\n",  // a field short
                                "x 1 all_gather X A ring 8 64 512 7 448 448 0.5 0\n",
                                "3 1 all_gather X A ring eight 64 512 7 448 448 0.5 0\n"}) {
    CAPTURE(bad);
    try {
      deserialize(bad);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::parse);
      CHECK(std::string(e.what()).find("ledger line is malformed") != std::string::npos);
    }
  }
}
