#include "collectives/ledger.hpp"

#include <map>
#include <sstream>

#include "core/error.hpp"

namespace shardlab {

void Ledger::add(LedgerRow row) {
  row.call = static_cast<int>(rows_.size());
  rows_.push_back(std::move(row));
}

std::string unmatched_messages(const std::vector<LedgerRow>& rows) {
  std::map<std::pair<int, int>, std::vector<const LedgerRow*>> sends, recvs;  // (from, to)
  for (const auto& r : rows) {
    if (r.op == "send") sends[{r.device, r.peer}].push_back(&r);
    if (r.op == "recv") recvs[{r.peer, r.device}].push_back(&r);
  }
  for (const auto& [pair, s] : sends) {
    const auto it = recvs.find(pair);
    const std::size_t got = it == recvs.end() ? 0 : it->second.size();
    const std::string from = "device " + std::to_string(pair.first), to = "device " + std::to_string(pair.second);
    if (got < s.size())
      return from + " sent " + s[got]->tensor + " (" + std::to_string(s[got]->bytes_sent) + " B, message " +
             std::to_string(got + 1) + " of " + std::to_string(s.size()) + ") to " + to + ", which never received it";
    for (std::size_t k = 0; k < s.size(); ++k) {
      const LedgerRow& r = *it->second[k];
      if (r.tensor != s[k]->tensor || r.bytes_received != s[k]->bytes_sent)
        return "messages do not match: message " + std::to_string(k + 1) + " from " + from + " to " + to + " was sent as " +
               s[k]->tensor + " (" + std::to_string(s[k]->bytes_sent) + " B) and received as " + r.tensor + " (" +
               std::to_string(r.bytes_received) + " B)";
    }
  }
  for (const auto& [pair, r] : recvs) {
    const auto it = sends.find(pair);
    if (it == sends.end() || it->second.size() < r.size())
      return "device " + std::to_string(pair.second) + " received more from device " + std::to_string(pair.first) +
             " than it sent";
  }
  return "";
}

namespace {
// Labels and axes never hold tabs or newlines (they are identifiers and comma lists).
std::string field(const std::string& s) { return s.empty() ? "-" : s; }
std::string unfield(const std::string& s) { return s == "-" ? "" : s; }
}  // namespace

std::string serialize(const std::vector<LedgerRow>& rows) {
  std::ostringstream out;
  out.precision(17);
  for (const auto& r : rows) {
    out << r.device << ' ' << r.call << ' ' << field(r.op) << ' ' << field(r.axes) << ' ' << field(r.tensor) << ' '
        << field(r.algorithm) << ' ' << r.group_size << ' ' << r.element_bytes << ' ' << r.input_bytes << ' ' << r.output_bytes << ' '
        << r.messages << ' ' << r.bytes_sent << ' ' << r.bytes_received << ' ' << r.seconds << ' ' << r.start_us << ' ' << r.peer << ' ' << r.modeled;
    if (!r.part_bytes.empty()) {  // uneven parts: member, count, then the bytes of each
      out << ' ' << r.member << ' ' << r.part_bytes.size();
      for (std::size_t b : r.part_bytes) out << ' ' << b;
    }
    out << '\n';
  }
  return out.str();
}

std::vector<LedgerRow> deserialize(const std::string& text) {
  std::vector<LedgerRow> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream ls(line);
    LedgerRow r;
    std::string op, axes, tensor, algo;
    if (!(ls >> r.device >> r.call >> op >> axes >> tensor >> algo >> r.group_size >> r.element_bytes >> r.input_bytes >>
          r.output_bytes >> r.messages >> r.bytes_sent >> r.bytes_received >> r.seconds >> r.start_us >> r.peer >> r.modeled))
      throw Error(ErrorKind::parse, "ledger line is malformed: " + line);
    std::size_t parts = 0;
    if (ls >> r.member >> parts) {
      r.part_bytes.resize(parts);
      for (auto& b : r.part_bytes)
        if (!(ls >> b)) throw Error(ErrorKind::parse, "ledger line is malformed: " + line);
    } else {
      r.member = -1;
    }
    r.op = unfield(op);
    r.axes = unfield(axes);
    r.tensor = unfield(tensor);
    r.algorithm = unfield(algo);
    rows.push_back(r);
  }
  return rows;
}

}  // namespace shardlab
