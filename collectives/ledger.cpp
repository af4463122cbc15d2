#include "collectives/ledger.hpp"

#include <sstream>

#include "core/error.hpp"

namespace shardlab {

void Ledger::add(LedgerRow row) {
  row.call = static_cast<int>(rows_.size());
  rows_.push_back(std::move(row));
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
        << r.messages << ' ' << r.bytes_sent << ' ' << r.bytes_received << ' ' << r.seconds << ' ' << r.modeled
        << '\n';
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
          r.output_bytes >> r.messages >> r.bytes_sent >> r.bytes_received >> r.seconds >> r.modeled))
      throw Error(ErrorKind::parse, "ledger line is malformed: " + line);
    r.op = unfield(op);
    r.axes = unfield(axes);
    r.tensor = unfield(tensor);
    r.algorithm = unfield(algo);
    rows.push_back(r);
  }
  return rows;
}

}  // namespace shardlab
